package telemetry

import (
	"bytes"
	"encoding/json"
	"sort"
)

// claudeResultJSON is the part of claude -p --output-format json's result
// object read here (Claude Code 2.1: "type":"result", with usage summed
// over the run and modelUsage keyed by model).
type claudeResultJSON struct {
	Type         *string  `json:"type"`
	TotalCostUSD *float64 `json:"total_cost_usd"`
	Usage        *struct {
		Input      *int64 `json:"input_tokens"`
		Output     *int64 `json:"output_tokens"`
		CacheRead  *int64 `json:"cache_read_input_tokens"`
		CacheWrite *int64 `json:"cache_creation_input_tokens"`
	} `json:"usage"`
	ModelUsage map[string]json.RawMessage `json:"modelUsage"`
	NumTurns   int                        `json:"num_turns"`
}

// ClaudeResult reads the JSON object claude -p --output-format json
// prints when it ends: the only place an agent states a cost
// (total_cost_usd, Claude Code's own reckoning at list prices). Its
// usage covers the whole process's run; with --resume, total_cost_usd
// and modelUsage also cover the earlier runs of the session, while usage
// covers only this one. Data that is not such an object gives nil counts
// and Missing.
func ClaudeResult(data []byte) Usage {
	var res claudeResultJSON
	if err := json.Unmarshal(bytes.TrimSpace(data), &res); err != nil {
		return missing(SourceClaudeResult, "", "not a claude -p --output-format json result: "+err.Error())
	}
	if res.Type == nil || *res.Type != "result" {
		return missing(SourceClaudeResult, "", `not a claude -p --output-format json result: no "type":"result"`)
	}
	u := Usage{Source: SourceClaudeResult, CostUSD: res.TotalCostUSD}
	if res.Usage != nil {
		u.Input, u.Output, u.CacheRead, u.CacheWrite = res.Usage.Input, res.Usage.Output, res.Usage.CacheRead, res.Usage.CacheWrite
	}
	var names []string
	for m := range res.ModelUsage {
		names = append(names, m)
	}
	sort.Strings(names)
	var ms models
	for _, m := range names {
		ms.add(m)
	}
	u.Model = ms.String()
	switch {
	case u.Input == nil && u.Output == nil && u.CostUSD == nil:
		u.Missing = "the result states neither usage nor cost"
	case u.Input == nil || u.Output == nil:
		u.Missing = "the result states no token usage"
	case u.CostUSD == nil:
		u.Missing = "the result states no cost"
	}
	return u
}
