package leadagent

import "errors"

// ErrBadSettings means the settings file is not a JSON object orch can
// merge into; nothing was written.
var ErrBadSettings = errors.New("settings file is not a JSON object")

// ErrUnknownAgent means a lead agent was named that orch cannot install.
var ErrUnknownAgent = errors.New("unknown lead agent (want claude)")
