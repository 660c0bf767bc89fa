# The generated extension is private and untyped: the package's modules are
# the typed API.
from typing import Any

def __getattr__(name: str) -> Any: ...
