"""``{% load form_layout %}``: the site's forms in groups (``templates/_form.html``).

A form declares its groups as ``fieldsets = [("Legend", ["field", ...]), ...]``; fields it does not list follow in
a last group headed "More". Forms without ``fieldsets`` render as one group without a legend.
"""
from django import template

register = template.Library()


@register.filter
def fieldsets(form) -> list[tuple[str | None, list]]:
    """[(legend or None, [BoundField, ...]), ...] of ``form`` in its declared order; empty groups are left out."""
    declared = getattr(form, "fieldsets", None)
    if not declared:
        return [(None, list(form))]
    groups, listed = [], set()
    for legend, names in declared:
        fields = [form[name] for name in names if name in form.fields]
        listed.update(names)
        if fields:
            groups.append((legend, fields))
    rest = [field for field in form if field.name not in listed]
    if rest:
        groups.append(("More", rest))
    return groups


@register.filter
def is_checkbox(field) -> bool:
    """True for a single checkbox (its label goes after the box)."""
    return getattr(field.field.widget, "input_type", None) == "checkbox" and not getattr(
        field.field.widget, "allow_multiple_selected", False
    )


@register.filter
def is_choice_list(field) -> bool:
    """True for radio buttons and checkbox lists (a group of inputs: fieldset + legend, not one label)."""
    widget = field.field.widget
    return getattr(widget, "input_type", None) in ("checkbox", "radio") and hasattr(widget, "choices") and not (
        is_checkbox(field)
    )
