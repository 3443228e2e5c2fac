package agent

import "strings"

// outageKinds are the error kinds an agent reports (Claude Code's
// StopFailure hook: its error field) that say the agent's service is out
// for now (a quota, a rate limit, an overload, its login), not that the
// work failed.
var outageKinds = []string{"rate_limit", "billing_error", "authentication_failed", "server_error", "overloaded_error", "overloaded"}

// Outage reads a failure's reason as the agent's hook gave it ("kind:
// message", as notify's StopFailure mapping writes it) and returns the
// kind when it is an outage. Anything else (a failed gate, a refutation,
// a permission stop, a timeout, an error without a kind) is no outage.
func Outage(reason string) (string, bool) {
	kind, _, found := strings.Cut(reason, ":")
	kind = strings.TrimSpace(kind)
	for _, k := range outageKinds {
		if kind == k && (found || reason == k) {
			return k, true
		}
	}
	return "", false
}
