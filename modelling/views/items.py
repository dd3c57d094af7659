"""Items by ORCA's predicted disagreement: questions with the active model's μ ± σ per candidate answer (experts and
admins)."""
import math

from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from annotation.access import STAFF, role_required
from modelling.orca.data import normalise_rating
from modelling.selectors import (
    item_candidates_with_predictions,
    item_question_list,
    model_version_active,
)


@role_required(*STAFF)
@require_GET
def items_page(request):
    """Questions with candidate answers of the benchmarks the user reads, the most uncertain (largest predicted σ²
    of the active model) first."""
    active = model_version_active()
    page = Paginator(item_question_list(model_version=active, user=request.user), 50).get_page(request.GET.get("page"))
    for question in page:
        variance = getattr(question, "max_variance", None)
        question.max_sigma = math.sqrt(variance) if variance is not None else None
    return render(request, "modelling/items.html", {"page": page, "active": active})


@role_required(*STAFF)
@require_GET
def item_page(request, pk: int):
    """One question: each candidate answer with the active model's μ ± σ (σ = √σ²) and the valid human ratings.

    Scores are on the normalised scale y = (r − 1)/4; the human mean is shown on the same scale next to the 1–5
    scores.
    """
    question = get_object_or_404(item_question_list(user=request.user), pk=pk)  # another team's: 404
    active = model_version_active()
    candidates = item_candidates_with_predictions(question=question, model_version=active)
    for c in candidates:
        scored = [s for s in c.valid_scores if s is not None]
        c.human_mean = sum(normalise_rating(s) for s in scored) / len(scored) if scored else None
        c.sigma = math.sqrt(c.prediction.variance) if c.prediction else None
    return render(request, "modelling/item.html", {
        "question": question, "version": question.current_version, "candidates": candidates, "active": active,
    })
