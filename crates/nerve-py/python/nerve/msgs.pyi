"""The standard messages (built at import from their schemas)."""

from typing import Any

from ._messages import Message, Struct

def __getattr__(name: str) -> Any: ...

Twist: type[Message]
TwistStamped: type[Message]
CmdVel: type[Message]
Clock: type[Message]
BatteryState: type[Message]
Imu: type[Message]
Odometry: type[Message]
LaserScan: type[Message]
PointCloud: type[Message]
Image: type[Message]
Empty: type[Message]
Outcome: type[Message]
Bool: type[Message]
TwoInts: type[Message]
Int: type[Message]
Bytes: type[Message]
TfMessage: type[Message]
FibonacciGoal: type[Message]
FibonacciSequence: type[Message]
TensorDescriptor: type[Message]

# managed nodes (lifecycle_msgs' names)
TransitionEvent: type[Message]
ChangeStateRequest: type[Message]
ChangeStateResponse: type[Message]
GetStateResponse: type[Message]
GetAvailableStatesResponse: type[Message]
GetAvailableTransitionsResponse: type[Message]
State: type[Struct]
Transition: type[Struct]
TransitionDescription: type[Struct]
