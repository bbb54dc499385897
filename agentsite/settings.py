"""agentsite settings: one module, driven by environment variables with safe defaults.

Embedded mode (no ``REDIS_URL``): SQLite under var/, in-memory channel layer, runs execute
on the ASGI server's event loop. Team mode (``REDIS_URL`` and ``DATABASE_URL``): Redis
channel layer, Redis cache, Celery workers on Redis, typically PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

import environ

from agentsite.secrets import load_or_create_dev_secret

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
VAR_DIR = Path(env.str("AGENTSITE_VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env.str("SECRET_KEY", default="") or load_or_create_dev_secret(VAR_DIR / "secret_key")
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
    "django_htmx",
    "template_partials",
    "agentsite",
    "llms",
    "tools",
    "conversations",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
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
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
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
    # Keep connections between run steps: reopening costs more CPU than most of the
    # short ORM calls a run makes (connect, PRAGMAs, Django's SQL functions).
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A process-wide pool, not persistent connections: the HTTP threads, the run threads
    # and channels' own sync threads (websocket connects) share a bounded, health-checked
    # set, instead of one connection (a PostgreSQL server process) held per thread.
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 2,
        "max_size": env.int("DB_POOL_SIZE", default=28),
        "timeout": 30,
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # the pool keeps them
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True  # checked when taken from the pool
else:
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True  # checked before reuse

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.str("REDIS_URL", default="")
AGENTSITE_EXECUTION = env.str("AGENTSITE_EXECUTION", default="celery" if REDIS_URL else "embedded")

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "agentsite.channel_layer.RedisPubSubLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
    CACHES = {
        "default": {
            "BACKEND": "agentsite.cache.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {"pool_class": "agentsite.cache.SharedConnectionPool"},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "agentsite.channel_layer.LocalChannelLayer"}}
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

CELERY_BROKER_URL = REDIS_URL or "memory://"
# kombu's Redis transport, publishing without a new client per message (agentsite.broker);
# any other URL (Sentinel, the in-memory broker) keeps the transport its scheme names.
CELERY_BROKER_TRANSPORT = (
    "agentsite.broker:Transport"
    if CELERY_BROKER_URL.startswith(("redis://", "rediss://"))
    else None
)
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# No acknowledgement emulation on Redis: it writes every delivered task to an "unacked"
# hash and index and removes it again on the ack (two MULTI round trips and ~1 ms of
# worker CPU per run), only to redeliver tasks of a crashed worker after the visibility
# timeout (an hour), by which time the stale-run sweep has failed the run anyway. Tasks a
# worker reserved but had not started still go back to the queue on a warm shutdown.
CELERY_BROKER_TRANSPORT_OPTIONS = {"ack_emulation": False}
# Team mode: `celery -A agentsite beat` marks runs whose worker died as failed.
CELERY_BEAT_SCHEDULE = {
    "sweep-stale-runs": {"task": "conversations.sweep_stale_runs", "schedule": 60.0},
}
AGENTSITE_RUN_STALE_SECONDS = env.int("AGENTSITE_RUN_STALE_SECONDS", default=90)
AGENTSITE_MESSAGE_MAX_CHARS = env.int("AGENTSITE_MESSAGE_MAX_CHARS", default=100_000)
AGENTSITE_API_RATE_LIMIT = env.int("AGENTSITE_API_RATE_LIMIT", default=120)  # per minute
AGENTSITE_DB_THREADS = env.int("AGENTSITE_DB_THREADS", default=16)  # ORM threads per process
# Runs of one process setting up (claim, load) or closing (save the answer) at once: the
# rest queue, so a burst of starts or ends leaves the process's loop free to stream.
# Each start waits for three database round trips: raise it when the database is far.
AGENTSITE_RUN_SETUP_CONCURRENCY = env.int("AGENTSITE_RUN_SETUP_CONCURRENCY", default=2)
# Threads serving sync views under daphne (agentsite.http); each keeps its DB connection.
AGENTSITE_HTTP_THREADS = env.int("AGENTSITE_HTTP_THREADS", default=8)
# A running run's process is woken when a follow-up or Stop is saved; it also checks this
# often in case a wake-up was lost (e.g. a Redis reconnect).
AGENTSITE_RUN_POLL_SECONDS = env.float("AGENTSITE_RUN_POLL_SECONDS", default=2.0)
# GIL switch interval of the streaming processes (CPython's default is 5 ms; 0 keeps it).
AGENTSITE_GIL_SWITCH_MS = env.float("AGENTSITE_GIL_SWITCH_MS", default=1.0)
AGENTSITE_SSE_HEARTBEAT = env.float("AGENTSITE_SSE_HEARTBEAT", default=15.0)  # seconds

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
# ModelBackend with each request's user read through the cache (agentsite/auth.py).
AUTHENTICATION_BACKENDS = ["agentsite.auth.CachedUserBackend"]
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env.str("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"] if (BASE_DIR / "static").is_dir() else []
# Serve straight from the app/static dirs: no collectstatic step is needed in any mode.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
MEDIA_ROOT = Path(env.str("MEDIA_ROOT", default=str(VAR_DIR / "media")))

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Sessions are read on every request: from the cache (Redis in team mode), written through
# to the database so a cache flush logs nobody out.
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env.bool("SECURE_COOKIES", default=False)
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        # Celery's "Task ... received" and "... succeeded in" lines: two writes per run on a
        # worker whose runner logs its own line per run (with the task id); they were a
        # tenth of the CPU of the worker's main thread. Failures still log at ERROR.
        "celery.worker.strategy": {"level": "WARNING"},
        "celery.app.trace": {"level": "WARNING"},
    },
}
