"""Local development and the embedded default (``make run``)."""
from .base import *  # noqa: F403
from .base import env

DEBUG = env.bool("DJANGO_DEBUG", default=True)
