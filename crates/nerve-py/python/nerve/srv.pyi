"""The standard service types (built at import from their schemas)."""

from typing import Any

from ._service import ServiceType

def __getattr__(name: str) -> Any: ...

Trigger: ServiceType
SetBool: ServiceType
AddTwoInts: ServiceType
Echo: ServiceType

# managed nodes (lifecycle_msgs' names)
ChangeState: ServiceType
GetState: ServiceType
GetAvailableStates: ServiceType
GetAvailableTransitions: ServiceType
