"""``python -m testing.oidc_provider --port N --data-dir DIR``: migrate a fresh SQLite
database in DIR, make (or reuse) the RSA signing key there, and serve on 127.0.0.1:N.

The control token comes from ``OIDC_PROVIDER_CONTROL_TOKEN`` (in the environment, not on a
command line other processes can read); without it one is made up and printed.
"""

from __future__ import annotations

import argparse
import os
import secrets
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

SETTINGS = "testing.oidc_provider.settings"
HOST = "127.0.0.1"


def ensure_signing_key(path: Path) -> None:
    """Kept in the data dir: a restarted provider signs with the same key, as a real one
    does, so tokens issued before a restart still verify."""
    if path.exists():
        return
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.write_bytes(pem)
    path.chmod(0o600)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m testing.oidc_provider")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    args = parser.parse_args(argv)

    data_dir = args.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    ensure_signing_key(data_dir / "signing-key.pem")
    token = os.environ.get("OIDC_PROVIDER_CONTROL_TOKEN")
    if not token:
        token = secrets.token_urlsafe(24)
        print(f"control token: {token}", flush=True)
    os.environ.update(
        # Whatever the parent process ran with (agentsite's settings), this is another site.
        DJANGO_SETTINGS_MODULE=SETTINGS,
        OIDC_PROVIDER_DATA_DIR=str(data_dir),
        OIDC_PROVIDER_ISSUER=f"http://{HOST}:{args.port}/o",
        OIDC_PROVIDER_CONTROL_TOKEN=token,
    )

    # Django is set up only now, from the environment written above.
    import django
    from django.core.management import call_command

    django.setup()
    # run_syncdb: this package's one model needs no migration files (the database is new).
    call_command("migrate", run_syncdb=True, interactive=False, verbosity=0)
    call_command("runserver", f"{HOST}:{args.port}", use_reloader=False, use_threading=True)


if __name__ == "__main__":
    main()
