"""agentsite settings: one module, driven by environment variables with safe defaults.

Embedded mode (no ``REDIS_URL``): SQLite under var/, in-memory channel layer, runs execute
on the ASGI server's event loop. Team mode (``REDIS_URL`` and ``DATABASE_URL``): Redis
channel layer, Redis cache, Celery workers on Redis, typically PostgreSQL.

Importing this module only reads: it creates, writes and chmods nothing. var/, the
generated secret key, the media folder and the SQLite file are made (private) by
``manage.py prepare_instance`` (core/management/commands/), which ``make run`` runs.
Every setting the code reads is defined here, with its default: code reads
``settings.X``, never ``getattr(settings, "X", default)``.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

from core.secrets import read_instance_secret

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
VAR_DIR = Path(env.str("AGENTSITE_VAR_DIR", default=str(BASE_DIR / "var")))

DEBUG = env.bool("DEBUG", default=False)
# Without SECRET_KEY in the environment: the key `manage.py prepare_instance` generated
# into this file (core/secrets.py). Neither: SECRET_KEY stays empty, the system check
# agentsite.E002 (core/checks.py) says what to do, and Django refuses to use it.
SECRET_KEY = env.str("SECRET_KEY", default="")
AGENTSITE_SECRET_KEY_FILE = None if SECRET_KEY else VAR_DIR / "secret_key"
if AGENTSITE_SECRET_KEY_FILE is not None:
    SECRET_KEY = read_instance_secret(AGENTSITE_SECRET_KEY_FILE)
ENCRYPTION_KEYS = env.list("ENCRYPTION_KEYS", default=[])
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "csp",
    "django_htmx",
    "template_partials",
    "core",
    "audit",  # the audit log (audit/): below the apps whose changes it records
    "files",  # users' own files (files/): attachments, knowledge documents
    "knowledge",  # knowledge bases (knowledge/): documents, chunks, full-text search
    "llms",
    "tools",
    "conversations",
    "axes",  # login lock-out (conversations/accounts/lockout.py)
]

MIDDLEWARE = [
    # First: the request id (X-Request-ID) and the log context of all below (core/logcontext.py).
    "core.logcontext.RequestContextMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",  # early: every response below it gets the policy
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The language from the language cookie or Accept-Language (docs/i18n.md) ...
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "core.outages.OutageMiddleware",  # before the first use of request.user
    # A user the identity provider disabled is logged out (conversations/accounts/).
    "conversations.accounts.middleware.ProviderRecheckMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    # ... unless the signed-in user chose one; and their time zone.
    "conversations.preferences.UserPreferencesMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a lock-out into its 429 answer
]

ROOT_URLCONF = "agentsite.urls"
ASGI_APPLICATION = "agentsite.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "conversations.context_processors.preferences",
            ],
            "builtins": [
                "template_partials.templatetags.partials",
                "conversations.templatetags.chat",
            ],
        },
    },
]

DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the chat stream (writes) while pages load (reads); IMMEDIATE avoids
    # "database is locked" upgrades when two writers meet.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        }
    )
    # Runs reach the database from long-lived threads: a new SQLite connection costs more
    # CPU than most of their queries. (A file, not a server: a connection left behind by
    # an ended request thread holds nothing but memory until it is collected.)
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Under ASGI, Django's documented choice: its connection pool instead of persistent
    # connections (requests run in short-lived threads). A request waits at most
    # DB_POOL_TIMEOUT seconds for a connection: during an outage it answers 503 then,
    # instead of hanging (every connection busy for that long is an outage to a user too).
    options = DATABASES["default"].setdefault("OPTIONS", {})
    options["pool"] = {
        "min_size": 2,
        "max_size": env.int("DB_POOL_SIZE", default=28),
        "timeout": env.float("DB_POOL_TIMEOUT", default=5.0),
    }
    options.setdefault("connect_timeout", 5)  # libpq's: an unreachable host fails fast
    DATABASES["default"]["CONN_MAX_AGE"] = 0
else:
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # ASGI: no persistent server connections
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.str("REDIS_URL", default="")
AGENTSITE_EXECUTION = env.str("AGENTSITE_EXECUTION", default="celery" if REDIS_URL else "embedded")

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            # One pool per process, not one per request (core/cache.py).
            "OPTIONS": {"pool_class": "core.cache.SharedConnectionPool"},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# No acknowledgement emulation on Redis: it writes every delivered task to an "unacked"
# hash and index and removes it again on the ack (two MULTI round trips per run), only to
# redeliver tasks of a crashed worker after the visibility timeout (an hour), by which
# time the stale-run sweep has failed the run anyway. Tasks a worker reserved but had not
# started still go back to the queue on a warm shutdown.
CELERY_BROKER_TRANSPORT_OPTIONS = {"ack_emulation": False}
# A running run whose heartbeat is this old is reported interrupted by the next sweep;
# every ASGI server sweeps this often.
AGENTSITE_RUN_STALE_SECONDS = env.int("AGENTSITE_RUN_STALE_SECONDS", default=25)
AGENTSITE_RUN_SWEEP_SECONDS = env.float("AGENTSITE_RUN_SWEEP_SECONDS", default=5.0)
# SIGTERM to exit, for a server or a worker (issue 44): runs get most of it to finish, the
# rest goes to ending or handing back the ones still going. Below the stop timeout of the
# service manager (deploy/systemd TimeoutStopSec, compose stop_grace_period: 30 s).
AGENTSITE_SHUTDOWN_GRACE_SECONDS = env.float("AGENTSITE_SHUTDOWN_GRACE_SECONDS", default=25.0)
AGENTSITE_MESSAGE_MAX_CHARS = env.int("AGENTSITE_MESSAGE_MAX_CHARS", default=100_000)
# The largest form or JSON body Django reads (413 beyond, before reading it): the longest
# message at 12 bytes a character (a JSON surrogate-pair escape, or %-encoded UTF-8 in a
# form) plus 64 KiB for the rest (conversations/http/body.py).
DATA_UPLOAD_MAX_MEMORY_SIZE = AGENTSITE_MESSAGE_MAX_CHARS * 12 + 64 * 1024
AGENTSITE_API_RATE_LIMIT = env.int("AGENTSITE_API_RATE_LIMIT", default=120)  # per minute
# GET /metrics answers this bearer token only; empty: /metrics is a 404 (core/metrics.py).
AGENTSITE_METRICS_TOKEN = env.str("AGENTSITE_METRICS_TOKEN", default="")
# The most messages and runs one conversation import writes, in one transaction that holds
# SQLite's write lock (2,000 runs and messages: 0.9 s on the 2-core test machine).
AGENTSITE_IMPORT_MAX_MESSAGES = env.int("AGENTSITE_IMPORT_MAX_MESSAGES", default=4_000)
AGENTSITE_IMPORT_MAX_RUNS = env.int("AGENTSITE_IMPORT_MAX_RUNS", default=2_000)
# Database threads of the runs of one process (conversations/runs/db.py), each keeping
# its connection, and threads serving sync views (agentsite/asgi.py), likewise.
AGENTSITE_DB_THREADS = env.int("AGENTSITE_DB_THREADS", default=16)
AGENTSITE_HTTP_THREADS = env.int("AGENTSITE_HTTP_THREADS", default=8)
# A running run writes its heartbeat this often, and re-checks for a Stop or follow-up
# whose wake-up message was lost (e.g. during a Redis reconnect).
AGENTSITE_RUN_HEARTBEAT_SECONDS = env.float("AGENTSITE_RUN_HEARTBEAT_SECONDS", default=5.0)
# A run still working after this many seconds is stopped and says so (0: no limit).
AGENTSITE_RUN_DEADLINE_SECONDS = env.float("AGENTSITE_RUN_DEADLINE_SECONDS", default=600.0)
# After a conversation's first answer, one small call to a model (the user's "fast" one,
# else the answer's) titles it from the question, unless the user gave a title
# (conversations/titles.py).
AGENTSITE_AUTO_TITLES = env.bool("AGENTSITE_AUTO_TITLES", default=True)
# A tool call waiting for the user's approval counts as denied after this long.
AGENTSITE_APPROVAL_TIMEOUT_SECONDS = env.float("AGENTSITE_APPROVAL_TIMEOUT_SECONDS", default=300.0)
# Python sandboxes (the python tool) running at once per process: the host's RAM for them
# is bounded by this many times one sandbox's memory and disk limits.
AGENTSITE_SANDBOX_CONCURRENCY = env.int("AGENTSITE_SANDBOX_CONCURRENCY", default=4)
# GIL switch interval of the streaming processes (CPython's default is 5 ms; 0 keeps it).
AGENTSITE_GIL_SWITCH_MS = env.float("AGENTSITE_GIL_SWITCH_MS", default=1.0)
AGENTSITE_SSE_HEARTBEAT = env.float("AGENTSITE_SSE_HEARTBEAT", default=15.0)  # seconds
# The bundled model's llama.cpp chat format (llms/local_server.py); "chatml" does not
# HTML-escape the prompt the way chatml-function-calling's template does.
LOCAL_MODEL_CHAT_FORMAT = env.str("AGENTSITE_LOCAL_CHAT_FORMAT", default="chatml")
# The bundled model's server: its state (API key, port, log), context length in tokens,
# and CPU threads (unset: llama.cpp's default, half the CPUs).
LOCAL_MODEL_DIR = Path(env.str("AGENTSITE_LOCAL_MODEL_DIR", default=str(VAR_DIR / "local_model")))
LOCAL_MODEL_N_CTX = env.int("AGENTSITE_LOCAL_N_CTX", default=8192)
LOCAL_MODEL_THREADS = env.int("AGENTSITE_LOCAL_THREADS", default=None)
# Loopback ports where `manage.py discover_models` and the admin's "Find local model
# servers" look for OpenAI-compatible servers (llms/discovery.py): Ollama, llama.cpp,
# LM Studio, vLLM. Empty: no discovery.
AGENTSITE_DISCOVERY_PORTS = env.list(
    "AGENTSITE_DISCOVERY_PORTS", cast=int, default=[11434, 8080, 1234, 8000]
)
# Tools that need the public internet (web_fetch) are offered only when it answers:
# "auto" checks by connecting to AGENTSITE_NETWORK_PROBE (host:port, cached a few
# minutes), "on" always offers them (behind a proxy the check cannot see), "off" never.
AGENTSITE_TOOLS_NETWORK = env.str("AGENTSITE_TOOLS_NETWORK", default="auto")
AGENTSITE_NETWORK_PROBE = env.str("AGENTSITE_NETWORK_PROBE", default="example.com:443")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
# Axes first: it refuses a locked-out login before the password is checked. Then the
# ModelBackend with each request's user read through the cache (conversations/accounts/users.py).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "conversations.accounts.users.CachedUserBackend",
]
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"
# Lock-out (django-axes, conversations/accounts/lockout.py): after this many failed logins for one
# username from one address, that pair is refused until the cool-off passes without a
# try; failed API tokens count per address. Admins unlock in the admin (Axes > Access
# attempts) or with `manage.py axes_reset_username` / `axes_reset_ip` / `axes_reset`.
AGENTSITE_LOGIN_FAILURE_LIMIT = env.int("AGENTSITE_LOGIN_FAILURE_LIMIT", default=5)
AGENTSITE_LOGIN_COOLOFF_MINUTES = env.float("AGENTSITE_LOGIN_COOLOFF_MINUTES", default=15.0)
AXES_FAILURE_LIMIT = AGENTSITE_LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=AGENTSITE_LOGIN_COOLOFF_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True  # a login clears that username and address's failures
AXES_LOCKOUT_CALLABLE = "conversations.accounts.lockout.lockout_response"
# Single sign-on (conversations/accounts/; docs/deployment.md "Single sign-on"). OpenID
# Connect when an issuer is set: its endpoints come from its discovery document.
AGENTSITE_OIDC_ISSUER = env.str("AGENTSITE_OIDC_ISSUER", default="")
AGENTSITE_OIDC_NAME = env.str("AGENTSITE_OIDC_NAME", default="single sign-on")  # the button
AGENTSITE_OIDC_GROUPS_CLAIM = env.str("AGENTSITE_OIDC_GROUPS_CLAIM", default="groups")
OIDC_RP_CLIENT_ID = env.str("AGENTSITE_OIDC_CLIENT_ID", default="")
OIDC_RP_CLIENT_SECRET = env.str("AGENTSITE_OIDC_CLIENT_SECRET", default="")
OIDC_RP_SCOPES = env.str("AGENTSITE_OIDC_SCOPES", default="openid email profile")
OIDC_RP_SIGN_ALGO = env.str("AGENTSITE_OIDC_SIGN_ALGO", default="RS256")
OIDC_USE_PKCE = True
OIDC_STORE_ID_TOKEN = True  # the logout's id_token_hint
OIDC_TIMEOUT = 10
# Only the provider's button on the login page (a local admin still has /admin/login/).
AGENTSITE_SSO_ONLY = env.bool("AGENTSITE_SSO_ONLY", default=False)
# How often the provider or directory is asked again whether a signed-in user (a session
# or an API token) is still enabled (conversations/accounts/recheck.py).
AGENTSITE_SSO_RECHECK_MINUTES = env.float("AGENTSITE_SSO_RECHECK_MINUTES", default=15.0)
if AGENTSITE_OIDC_ISSUER:
    AUTHENTICATION_BACKENDS.append("conversations.accounts.oidc.SSOBackend")

# LDAP when a server URI is set (the `ldap` extra: python-ldap and django-auth-ldap).
AUTH_LDAP_SERVER_URI = env.str("AGENTSITE_LDAP_SERVER_URI", default="")
AUTH_LDAP_BIND_DN = env.str("AGENTSITE_LDAP_BIND_DN", default="")
AUTH_LDAP_BIND_PASSWORD = env.str("AGENTSITE_LDAP_BIND_PASSWORD", default="")
if AUTH_LDAP_SERVER_URI:
    try:
        import ldap
        from django_auth_ldap import config as ldap_config
    except ImportError as exc:
        raise ImproperlyConfigured(
            "AGENTSITE_LDAP_SERVER_URI is set but LDAP support is not installed: "
            "pip install -e '.[ldap]' (it compiles python-ldap against Debian's "
            "libldap2-dev and libsasl2-dev)."
        ) from exc
    AUTH_LDAP_START_TLS = env.bool("AGENTSITE_LDAP_START_TLS", default=False)
    AUTH_LDAP_CONNECTION_OPTIONS = {ldap.OPT_NETWORK_TIMEOUT: 5, ldap.OPT_TIMEOUT: 10}
    AUTH_LDAP_USER_SEARCH = ldap_config.LDAPSearch(
        env.str("AGENTSITE_LDAP_USER_BASE"),
        ldap.SCOPE_SUBTREE,
        env.str("AGENTSITE_LDAP_USER_FILTER", default="(uid=%(user)s)"),
    )
    AUTH_LDAP_USER_ATTR_MAP = {"first_name": "givenName", "last_name": "sn", "email": "mail"}
    _LDAP_GROUP_TYPES = {
        "groupOfNames": (ldap_config.GroupOfNamesType, "(objectClass=groupOfNames)"),
        "groupOfUniqueNames": (
            ldap_config.GroupOfUniqueNamesType,
            "(objectClass=groupOfUniqueNames)",
        ),
        "posixGroup": (ldap_config.PosixGroupType, "(objectClass=posixGroup)"),
        "activeDirectory": (ldap_config.ActiveDirectoryGroupType, "(objectClass=group)"),
    }
    _group_type_name = env.str("AGENTSITE_LDAP_GROUP_TYPE", default="groupOfNames")
    if _group_type_name not in _LDAP_GROUP_TYPES:
        raise ImproperlyConfigured(
            f"AGENTSITE_LDAP_GROUP_TYPE={_group_type_name!r}: use one of "
            f"{', '.join(_LDAP_GROUP_TYPES)}."
        )
    _group_type, _group_filter = _LDAP_GROUP_TYPES[_group_type_name]
    AUTH_LDAP_GROUP_TYPE = _group_type(name_attr="cn")
    AUTH_LDAP_GROUP_SEARCH = ldap_config.LDAPSearch(
        env.str("AGENTSITE_LDAP_GROUP_BASE"), ldap.SCOPE_SUBTREE, _group_filter
    )
    # Members of this group may sign in; out of it, the user is disabled at their next
    # sign-in or check (the library sets is_active from it at each sign-in).
    AUTH_LDAP_REQUIRE_GROUP = env.str("AGENTSITE_LDAP_REQUIRE_GROUP", default="") or None
    if AUTH_LDAP_REQUIRE_GROUP:
        AUTH_LDAP_USER_FLAGS_BY_GROUP = {"is_active": AUTH_LDAP_REQUIRE_GROUP}
    AUTHENTICATION_BACKENDS.append("conversations.accounts.ldapauth.DirectoryBackend")

# Reverse proxies in front of the site (nginx: 1). The client's address is then the one the
# outermost of them appended to X-Forwarded-For, never the header's client-sent part;
# with 0 the header is ignored (conversations/accounts/addresses.py).
AGENTSITE_TRUSTED_PROXY_HOPS = env.int("AGENTSITE_TRUSTED_PROXY_HOPS", default=0)
AXES_CLIENT_IP_CALLABLE = "conversations.accounts.addresses.client_address"

LANGUAGE_CODE = "en"
# The interface's languages (a user picks one in Settings; the agent is told to answer in
# it). English first: the fallback.
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文"), ("ja", "日本語")]
# Our one set of catalogues (templates, apps, static/js): `make messages` (docs/i18n.md).
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = env.str("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"  # made by prepare_instance (WhiteNoise warns without)
STATICFILES_DIRS = [BASE_DIR / "static"] if (BASE_DIR / "static").is_dir() else []
# Collected (``manage.py collectstatic``, as ``make run`` does): names carry a content hash,
# are served compressed and cached for good, so the 5.5 MB mermaid bundle downloads once.
# Otherwise straight from the app/static dirs, with no collect step (tests, development).
AGENTSITE_STATIC_COLLECTED = env.bool("AGENTSITE_STATIC_COLLECTED", default=False)
WHITENOISE_USE_FINDERS = not AGENTSITE_STATIC_COLLECTED
if AGENTSITE_STATIC_COLLECTED:
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
WHITENOISE_AUTOREFRESH = DEBUG
MEDIA_ROOT = Path(env.str("MEDIA_ROOT", default=str(VAR_DIR / "media")))  # prepare_instance: 0700
FILE_UPLOAD_PERMISSIONS = 0o600  # artifacts and uploads: the app's user only
FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o700
# Artifacts tools produce (tools/artifacts.py): the largest file, and all of one
# conversation's files together; a share snapshot copies artifacts up to these sizes,
# each and together (conversations/transfer/sharing.py).
ARTIFACT_MAX_BYTES = env.int("AGENTSITE_ARTIFACT_MAX_BYTES", default=10 * 1024 * 1024)
ARTIFACT_CONVERSATION_MAX_BYTES = env.int(
    "AGENTSITE_ARTIFACT_CONVERSATION_MAX_BYTES", default=50 * 1024 * 1024
)
AGENTSITE_SHARE_ARTIFACT_MAX_BYTES = env.int(
    "AGENTSITE_SHARE_ARTIFACT_MAX_BYTES", default=1024 * 1024
)
AGENTSITE_SHARE_ARTIFACTS_MAX_BYTES = env.int(
    "AGENTSITE_SHARE_ARTIFACTS_MAX_BYTES", default=5 * 1024 * 1024
)
# Users' own files (files/): the largest upload, and all of one user's files together.
# nginx lets bodies of POST /api/files through up to 21m (deploy/nginx.conf): raise both.
AGENTSITE_FILE_MAX_BYTES = env.int("AGENTSITE_FILE_MAX_BYTES", default=20 * 1024 * 1024)
# The largest request body agentsite-server reads at all: a longer declared body gets a
# 413 before a byte of it is read (agentsite/body_limit.py). The app's own limits plus
# their framing, so that the app's 413 explains a body only a little too large.
AGENTSITE_SERVER_MAX_BODY_BYTES = env.int(
    "AGENTSITE_SERVER_MAX_BODY_BYTES",
    default=max(DATA_UPLOAD_MAX_MEMORY_SIZE, AGENTSITE_FILE_MAX_BYTES + 1024 * 1024) + 64 * 1024,
)
AGENTSITE_FILE_QUOTA_BYTES = env.int("AGENTSITE_FILE_QUOTA_BYTES", default=500 * 1024 * 1024)
# Knowledge bases (knowledge/): chunk size and overlap in characters; PostgreSQL's text
# search configuration ("english": stems and drops stop words, recall@5 0.95 on the test
# corpus against 0.55 for "simple", which keeps every word; Chinese and Japanese are
# stored as two-character pieces either way). Changing it needs a re-index.
AGENTSITE_KNOWLEDGE_CHUNK_CHARS = env.int("AGENTSITE_KNOWLEDGE_CHUNK_CHARS", default=1200)
AGENTSITE_KNOWLEDGE_CHUNK_OVERLAP = env.int("AGENTSITE_KNOWLEDGE_CHUNK_OVERLAP", default=200)
AGENTSITE_KNOWLEDGE_SEARCH_CONFIG = env.str("AGENTSITE_KNOWLEDGE_SEARCH_CONFIG", default="english")
# Team mode: a document queued this long (its task lost), or indexing this long without its
# worker's heartbeat, is sent again by the servers' sweep (knowledge/recovery.py); longer
# than the queue ever keeps a document waiting.
AGENTSITE_KNOWLEDGE_STALE_SECONDS = env.float("AGENTSITE_KNOWLEDGE_STALE_SECONDS", default=300.0)
# Files attached to a message (conversations/attachments.py): how many to a message, the
# text inlined for the model (longer files are read with the read_file tool), and the
# largest image sent to a vision model.
AGENTSITE_MESSAGE_MAX_FILES = env.int("AGENTSITE_MESSAGE_MAX_FILES", default=10)
AGENTSITE_FILE_INLINE_CHARS = env.int("AGENTSITE_FILE_INLINE_CHARS", default=8000)
AGENTSITE_IMAGE_MAX_BYTES = env.int("AGENTSITE_IMAGE_MAX_BYTES", default=5 * 1024 * 1024)

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Sessions are read on every request: from the cache (Redis in team mode), written through
# to the database so a cache flush logs nobody out.
# In the database only: one indexed read per request, and no Redis on the path of every
# request (cached_db fails the request when Redis is down, and a failed cache delete at
# logout would let the session come back with Redis).
SESSION_ENGINE = "django.contrib.sessions.backends.db"
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env.bool("SECURE_COOKIES", default=False)
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
# Content Security Policy (django-csp) of every response: scripts, styles, images and
# connections (XHR and the chat's websocket) from this origin only, no inline code and no
# eval, so an answer steered by a prompt injection can neither run script nor make the
# browser send anything to another host. Artifact views send their own sandboxed policy
# (tools/views.py).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'none'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],  # CSP Level 3: 'self' includes ws:/wss: of this host
        "frame-src": ["'self'"],  # sandboxed artifact previews
        "frame-ancestors": ["'none'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
    },
}
if AGENTSITE_OIDC_ISSUER:
    # Logging out posts here, then redirects to the provider's end-session endpoint:
    # browsers hold a form's redirects to its form-action too.
    _issuer = urlsplit(AGENTSITE_OIDC_ISSUER)
    CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"].append(
        f"{_issuer.scheme}://{_issuer.netloc}"
    )

# "text" (one line of text a record) or "json" (one JSON object a line, with the request,
# user, conversation, run and Celery task ids: core/jsonlog.py, core/logcontext.py). Both
# on stderr; daphne's access log is its own, on stdout (docs/deployment.md, "Logs").
AGENTSITE_LOG_FORMAT = env.str("AGENTSITE_LOG_FORMAT", default="text")
if AGENTSITE_LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(
        f"AGENTSITE_LOG_FORMAT is {AGENTSITE_LOG_FORMAT!r}: set it to text or json"
    )
_JSON_LOGS = AGENTSITE_LOG_FORMAT == "json"
# A Celery worker keeps this configuration instead of putting its own handler on the root
# logger (and its task logger, which does not propagate, writes through it too).
CELERY_WORKER_HIJACK_ROOT_LOGGER = not _JSON_LOGS

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "core.logcontext.ContextFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "core.jsonlog.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "json" if _JSON_LOGS else "plain",
            "filters": ["context"] if _JSON_LOGS else [],
        }
    },
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        **({"celery.task": {"handlers": ["console"], "propagate": False}} if _JSON_LOGS else {}),
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        # Celery's "Task ... received" and "... succeeded in" lines: two writes per run on a
        # worker whose runner logs its own line per run (with the task id); they were a
        # tenth of the CPU of the worker's main thread. Failures still log at ERROR.
        "celery.worker.strategy": {"level": "WARNING"},
        "celery.app.trace": {"level": "WARNING"},
    },
}
