"""Production: secrets and hosts come from the environment, with no defaults.

``python manage.py check --deploy --settings=config.settings.production`` is clean with ``.env.example``'s values
and a real ``DJANGO_SECRET_KEY`` of 50+ random characters; a shorter or published key (``config.secret_key``) stops
every production process (web, workers, beat, migrate) at start. Scaling out (README, "Scaling out"): PostgreSQL
connection pooling (``DATABASE_POOL``) and S3-compatible media storage (``MEDIA_STORAGE=s3``) switch on here.
"""
from django.core.exceptions import ImproperlyConfigured

from config.secret_key import GENERATE_HINT, secret_key_problem

from .base import *  # noqa: F403
from .base import STORAGES, env, logging_config

DEBUG = False
SECRET_KEY = env("DJANGO_SECRET_KEY")
if _secret_key_problem := secret_key_problem(SECRET_KEY):
    raise ImproperlyConfigured(
        f"DJANGO_SECRET_KEY {_secret_key_problem}: refusing to start with production settings. Generate one with "
        f"{GENERATE_HINT}"
    )
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS")

# --- Database: persistent connections (default) or psycopg's connection pool (Django >= 5.1) ------------------
DATABASES = {"default": env.db("DATABASE_URL")}
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if env.bool("DATABASE_POOL", default=False):
    # One pool per process (each gunicorn worker, each Celery worker process); CONN_MAX_AGE must be 0 with it.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": env.int("DATABASE_POOL_MIN_SIZE", default=2),
        "max_size": env.int("DATABASE_POOL_MAX_SIZE", default=10),
        "timeout": env.float("DATABASE_POOL_TIMEOUT_S", default=10.0),
    }
else:
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
# Behind pgbouncer in transaction mode, server-side cursors and prepared statements must be off.
if env.bool("DATABASE_PGBOUNCER", default=False):
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
    # Transaction pooling hands each transaction any server connection: no prepared statements.
    QUEUE_PREPARED_STATEMENTS = env.bool("QUEUE_PREPARED_STATEMENTS", default=False)

# --- Media: a local/shared folder (MEDIA_ROOT, default) or an S3-compatible bucket via django-storages ---------
MEDIA_STORAGE = env("MEDIA_STORAGE", default="filesystem")  # "filesystem" or "s3"
if MEDIA_STORAGE == "s3":
    STORAGES = {
        **STORAGES,
        "default": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": env("MEDIA_S3_BUCKET"),
                "endpoint_url": env("MEDIA_S3_ENDPOINT_URL", default="") or None,  # MinIO, Ceph, R2, ...
                "region_name": env("MEDIA_S3_REGION", default="") or None,
                "access_key": env("MEDIA_S3_ACCESS_KEY_ID", default="") or None,
                "secret_key": env("MEDIA_S3_SECRET_ACCESS_KEY", default="") or None,
                "location": env("MEDIA_S3_PREFIX", default="media"),
                "default_acl": None,
                "querystring_auth": True,  # private bucket: signed, expiring URLs
                "file_overwrite": False,
            },
        },
    }
elif MEDIA_STORAGE != "filesystem":
    raise ValueError(f"MEDIA_STORAGE must be 'filesystem' or 's3', not {MEDIA_STORAGE!r}")

# --- HTTPS, cookies, headers ------------------------------------------------------------------------------------
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=True)
# /healthz and /readyz answer plain HTTP probes from inside the container network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
LOG_FORMAT = env("LOG_FORMAT", default="json")
LOGGING = logging_config(fmt=LOG_FORMAT, level=env("LOG_LEVEL", default="INFO"))
