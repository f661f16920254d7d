"""pipecat's WebSocket frames as protobuf message classes, built at import from a declaration.

The schema is ``frames.proto`` beside this module (pipecat's published ``frames.proto``:
message names, field numbers and types). Instead of committing ``protoc`` output, which ties the
``protobuf`` runtime to the generator's major version, the same schema is declared here as data
and turned into a ``FileDescriptorProto``; ``tests/unit/test_pipecat_wire.py`` compiles the
``.proto`` with ``protoc`` (when ``grpcio-tools`` is installed) and checks the two descriptors are
identical. The classes live in a private descriptor pool, so a process that also imports pipecat's
own ``frames_pb2`` (the same ``pipecat.*`` names) sees no clash.

Only the ``protobuf`` package is needed at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PROTO_FILE_NAME = "frames.proto"
PACKAGE = "pipecat"

_Field = descriptor_pb2.FieldDescriptorProto
UINT64, UINT32 = _Field.TYPE_UINT64, _Field.TYPE_UINT32
STRING, BYTES, MESSAGE = _Field.TYPE_STRING, _Field.TYPE_BYTES, _Field.TYPE_MESSAGE

#: message -> fields as (name, number, type, proto3 ``optional``), in declaration order
MESSAGES: dict[str, tuple[tuple[str, int, int, bool], ...]] = {
    "TextFrame": (("id", 1, UINT64, False), ("name", 2, STRING, False),
                  ("text", 3, STRING, False)),
    "AudioRawFrame": (("id", 1, UINT64, False), ("name", 2, STRING, False),
                      ("audio", 3, BYTES, False), ("sample_rate", 4, UINT32, False),
                      ("num_channels", 5, UINT32, False), ("pts", 6, UINT64, True)),
    "TranscriptionFrame": (("id", 1, UINT64, False), ("name", 2, STRING, False),
                           ("text", 3, STRING, False), ("user_id", 4, STRING, False),
                           ("timestamp", 5, STRING, False)),
    "MessageFrame": (("data", 1, STRING, False),),
    "InterruptionFrame": (("id", 1, UINT64, False), ("name", 2, STRING, False)),
}

#: the ``Frame`` envelope's ``oneof frame``: kind -> (field number, message)
FRAME_KINDS: dict[str, tuple[int, str]] = {
    "text": (1, "TextFrame"),
    "audio": (2, "AudioRawFrame"),
    "transcription": (3, "TranscriptionFrame"),
    "message": (4, "MessageFrame"),
    "interruption": (5, "InterruptionFrame"),
}
ONEOF = "frame"


def _json_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _field(name: str, number: int, kind: int, *, type_name: str = "",
           oneof_index: int | None = None,
           proto3_optional: bool = False) -> descriptor_pb2.FieldDescriptorProto:
    field = _Field(name=name, number=number, label=_Field.LABEL_OPTIONAL, type=kind,
                   json_name=_json_name(name))
    if type_name:
        field.type_name = type_name
    if oneof_index is not None:
        field.oneof_index = oneof_index
    if proto3_optional:
        field.proto3_optional = True
    return field


def file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """The schema as ``protoc`` would describe ``frames.proto``."""
    proto = descriptor_pb2.FileDescriptorProto(name=PROTO_FILE_NAME, package=PACKAGE,
                                               syntax="proto3")
    for message_name, fields in MESSAGES.items():
        message = proto.message_type.add(name=message_name)
        for name, number, kind, optional in fields:
            if optional:  # proto3 `optional`: a synthetic oneof of its own, named `_<field>`
                message.oneof_decl.add(name=f"_{name}")
            message.field.append(_field(
                name, number, kind, proto3_optional=optional,
                oneof_index=len(message.oneof_decl) - 1 if optional else None))
    frame = proto.message_type.add(name="Frame")
    frame.oneof_decl.add(name=ONEOF)
    for kind_name, (number, message_name) in FRAME_KINDS.items():
        frame.field.append(_field(kind_name, number, MESSAGE, oneof_index=0,
                                  type_name=f".{PACKAGE}.{message_name}"))
    return proto


class FieldDescriptor(Protocol):
    """What the codec reads of a set field's descriptor."""

    @property
    def name(self) -> str: ...


@runtime_checkable
class Message(Protocol):
    """The part of a protobuf message the codec uses (the runtime ships no type stubs)."""

    def ListFields(self) -> Sequence[tuple[FieldDescriptor, object]]: ...  # noqa: N802

    def WhichOneof(self, oneof_group: str) -> str | None: ...  # noqa: N802

    def SerializeToString(self) -> bytes: ...  # noqa: N802


class MessageClass(Protocol):
    """A generated message class: built from field values, or parsed from bytes."""

    def __call__(self, **fields: object) -> Message: ...

    def FromString(self, data: bytes) -> Message: ...  # noqa: N802


def _message_classes() -> dict[str, MessageClass]:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_descriptor())
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
            for name in (*MESSAGES, "Frame")}


_CLASSES = _message_classes()

#: the envelope: ``Frame.FromString(data)``, ``Frame(text=TextFrame(text=...))``
Frame: MessageClass = _CLASSES["Frame"]
TextFrame: MessageClass = _CLASSES["TextFrame"]
AudioRawFrame: MessageClass = _CLASSES["AudioRawFrame"]
TranscriptionFrame: MessageClass = _CLASSES["TranscriptionFrame"]
MessageFrame: MessageClass = _CLASSES["MessageFrame"]
InterruptionFrame: MessageClass = _CLASSES["InterruptionFrame"]
#: the ``Frame`` envelope's kind -> the class of the message it holds
KIND_CLASSES: dict[str, MessageClass] = {kind: _CLASSES[message]
                                         for kind, (_, message) in FRAME_KINDS.items()}
