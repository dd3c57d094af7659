"""The API's router: primary keys in URLs are 1–18 digits, so a malformed or huge id is a 404, never a database
overflow (found by schemathesis)."""
from rest_framework.routers import SimpleRouter

#: Largest primary key the URL and filter patterns accept (PostgreSQL bigint is < 2**63).
MAX_ID = 2**63 - 1


class IdRouter(SimpleRouter):
    """``SimpleRouter`` whose detail routes only match digit ids."""

    def get_lookup_regex(self, viewset, lookup_prefix=""):
        if not hasattr(viewset, "lookup_value_regex"):
            viewset.lookup_value_regex = r"[0-9]{1,18}"
        return super().get_lookup_regex(viewset, lookup_prefix)
