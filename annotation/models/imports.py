"""Imports: table imports with their mapping, and the import-only accounts of raters whose ratings came from a file."""
from django.conf import settings
from django.db import models

from annotation.models.items import Benchmark


class TableImport(models.Model):
    """One table import (CSV, TSV, JSON, JSONL, Parquet or a Hugging Face ``datasets`` folder) with its mapping
    document: a draft while an admin maps its columns in the browser, then the record of what was imported.

    The mapping (``annotation.services.importers.table_mapping``) is saved here and can be downloaded and used
    again (``manage.py import_table --mapping``). Runs from the browser are ``Job(kind="import")`` rows whose
    ``params["table_import"]`` is this row's pk; ``job`` is the latest.
    """

    class SourceKind(models.TextChoices):
        UPLOAD = "upload", "Uploaded file"
        PATH = "path", "Server path"
        URL = "url", "URL"

    benchmark_name = models.CharField(max_length=200, help_text="The benchmark the rows go into (created if new).")
    benchmark = models.ForeignKey(
        Benchmark, null=True, blank=True, on_delete=models.SET_NULL, related_name="table_imports",
        help_text="The benchmark, once rows were imported into it.",
    )
    source_kind = models.CharField(max_length=10, choices=SourceKind.choices, help_text="Where the table came from.")
    source = models.CharField(max_length=1000, help_text="The uploaded file's name, the server path or the URL.")
    file_path = models.CharField(max_length=1000, help_text="The table file (or dataset folder) on this server.")
    file_format = models.CharField(
        max_length=10, help_text="csv, tsv, json (a list of objects), jsonl, parquet or hf (load_from_disk)."
    )
    audio_root = models.CharField(
        max_length=1000, blank=True, help_text="Folder or zip file the audio column's relative paths start from."
    )
    mapping = models.JSONField(default=dict, blank=True, help_text="The mapping document: which column is what.")
    columns = models.JSONField(default=list, blank=True, help_text="The table's column names, as read.")
    rows = models.PositiveIntegerField(null=True, blank=True, help_text="Number of data rows in the table.")
    summary = models.JSONField(
        default=dict, blank=True, help_text="Counts of the last import of this table (questions, candidate "
                                            "answers, LALMs, ratings created/updated).",
    )
    job = models.ForeignKey(
        "Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The latest validation or import job started from the browser.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    imported_at = models.DateTimeField(null=True, blank=True, help_text="When rows were last imported from it.")

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.source} -> {self.benchmark_name}"


class ImportAccount(models.Model):
    """Marks a user as an import-only account: the pseudonym of a rater whose ratings were imported from a file.

    The account has no usable password and is inactive, so nobody can log in as it; its ratings are ordinary
    ratings (``source="import"``) that count in alpha, the leaderboard and training. ``key`` is the HMAC-SHA256
    of (namespace, rater id) under the site's ``SECRET_KEY`` (``annotation.services.accounts``), so the rater id
    itself is stored nowhere and the same rater of the same namespace maps to the same account on every import.
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="import_account")
    key = models.CharField(max_length=64, unique=True, help_text="HMAC-SHA256 (hex) of the namespace and rater id.")
    namespace = models.CharField(
        max_length=200, help_text="Whose rater ids these are (default: the benchmark the ratings came with)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.user} (imported, {self.namespace})"
