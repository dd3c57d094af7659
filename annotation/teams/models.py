"""Benchmark membership (app label ``annotation``; imported by ``annotation.models``).

The rule (:mod:`annotation.teams.scope`): a benchmark with no members is open to everyone who has no membership; a
user with memberships works on their benchmarks only; so on a platform without memberships everyone rates
everything, as before teams existed, and a benchmark an admin gives a team is served to that team alone.
"""
from django.conf import settings
from django.db import models


class BenchmarkMembership(models.Model):
    """``user`` works on ``benchmark`` (rates it; as an expert, sees its refinement queues)."""

    benchmark = models.ForeignKey("annotation.Benchmark", on_delete=models.CASCADE, related_name="memberships",
                                  help_text="The benchmark the user works on.")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="benchmark_memberships",
                             help_text="An annotator, expert or admin.")
    added_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+", help_text="The admin who added the membership.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["benchmark", "user"]
        constraints = [
            models.UniqueConstraint(fields=["benchmark", "user"], name="membership_one_per_benchmark_user"),
        ]
        indexes = [models.Index(fields=["user", "benchmark"])]

    def __str__(self) -> str:
        return f"{self.user} on {self.benchmark}"
