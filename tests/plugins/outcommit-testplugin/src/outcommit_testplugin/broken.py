"""A plugin whose requirements are missing: importing it fails."""

import outcommit_this_module_does_not_exist  # noqa: F401
