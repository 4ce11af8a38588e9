package acp

// ProtocolName is the protocol name that requests carry in task.Protocol.
const ProtocolName = "acp"

// Version is the ACP version this adapter speaks: the i-am-bee/acp OpenAPI 0.2.0
// (docs/spec/openapi.yaml). ACP has no version header, so every request is 0.2.
const Version = "0.2"
