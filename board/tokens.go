package board

import (
	"fmt"
	"strings"

	"github.com/orch-dev/orch/telemetry"
)

// Tokens is a short line of what an attempt's agent used: "12k in, 4.1k
// out, 80k cached, $0.02". Unknown counts are left out, never shown as 0;
// a usage with none says it is missing.
func Tokens(u *telemetry.Usage) string {
	if u == nil {
		return ""
	}
	var parts []string
	add := func(n *int64, what string) {
		if n != nil {
			parts = append(parts, count(*n)+" "+what)
		}
	}
	add(u.Input, "in")
	add(u.Output, "out")
	if u.CacheRead != nil || u.CacheWrite != nil {
		var c int64
		if u.CacheRead != nil {
			c += *u.CacheRead
		}
		if u.CacheWrite != nil {
			c += *u.CacheWrite
		}
		parts = append(parts, count(c)+" cached")
	}
	if u.CostUSD != nil {
		parts = append(parts, fmt.Sprintf("$%.2f", *u.CostUSD))
	}
	if len(parts) == 0 {
		return "tokens missing"
	}
	return strings.Join(parts, ", ")
}

// count writes n short: 950, 4.1k, 12k, 4.1M.
func count(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%.0fk", float64(n)/1e3)
	case n >= 1_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
