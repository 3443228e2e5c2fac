package agent

import "testing"

func TestOutage(t *testing.T) {
	for _, tc := range []struct {
		reason, kind string
	}{
		{"rate_limit: API Error: 429 Rate limit exceeded", "rate_limit"},
		{"authentication_failed: Invalid API key", "authentication_failed"},
		{"billing_error: credit balance too low", "billing_error"},
		{"server_error: API Error: 529 overloaded", "server_error"},
		{"rate_limit", "rate_limit"},
		{"invalid_request: prompt too long", ""},
		{"max_output_tokens: cut", ""},
		{"API Error: 429 Rate limit exceeded", ""}, // no kind: not read from the message
		{`gate "go test" exit 1`, ""},
		{"no \"started\" within 2m0s", ""},
		{"rate_limited_thing: x", ""},
	} {
		kind, ok := Outage(tc.reason)
		if kind != tc.kind || ok != (tc.kind != "") {
			t.Errorf("%q: %q %v, want %q", tc.reason, kind, ok, tc.kind)
		}
	}
}
