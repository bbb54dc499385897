#!/bin/sh
# Entry point of the agentsite image: load the keys, then run the command.
#
# The keys live in AGENTSITE_KEYS_DIR (the `keys` volume of compose.yaml), one file each:
#   secret_key       Django's SECRET_KEY (sessions, CSRF, signed links)
#   encryption_keys  ENCRYPTION_KEYS: comma-separated Fernet keys, the first encrypts
# A variable set in the environment wins over its file. `setup` (compose's one-shot
# service) first writes each missing file with a new random key, then prepares the
# instance: migrate, a first model from OPENAI_* (or the bundled one), the first admin.
# Back the keys up apart from the database: its stored secrets are useless without them.
set -eu

keys=${AGENTSITE_KEYS_DIR:-/var/lib/agentsite-keys}
python=${PYTHON:-python}

new_key() { # FILE PYTHON-EXPRESSION: write a key into FILE (0600) unless it holds one
    if [ ! -s "$1" ]; then
        (umask 077 && "$python" -c "$2" >"$1.new" && mv "$1.new" "$1")
        echo "agentsite: generated $1"
    fi
}

if [ "${1:-}" = setup ]; then
    shift
    (umask 077 && mkdir -p "$keys")
    if [ -z "${SECRET_KEY:-}" ]; then
        new_key "$keys/secret_key" 'import secrets; print(secrets.token_urlsafe(50))'
    fi
    if [ -z "${ENCRYPTION_KEYS:-}" ]; then
        new_key "$keys/encryption_keys" \
            'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'
    fi
    set -- sh -c '
        set -eu
        python manage.py prepare_instance
        python manage.py migrate --noinput
        python manage.py seed_models
        python manage.py ensure_admin --url "${AGENTSITE_PUBLIC_URL:-http://localhost/}"
    ' "$@"
fi

if [ -z "${SECRET_KEY:-}" ] && [ -s "$keys/secret_key" ]; then
    SECRET_KEY=$(cat "$keys/secret_key")
    export SECRET_KEY
fi
if [ -z "${ENCRYPTION_KEYS:-}" ] && [ -s "$keys/encryption_keys" ]; then
    ENCRYPTION_KEYS=$(cat "$keys/encryption_keys")
    export ENCRYPTION_KEYS
fi

exec "$@"
