package event

import "testing"

// BenchmarkNewMarshalParse is one event as orch-notify makes it and the lead
// loop reads it: a new id, JSON out, JSON in with its checks.
func BenchmarkNewMarshalParse(b *testing.B) {
	for b.Loop() {
		data := New(Done, "fix-auth", "tests pass", "w1", "host").Marshal()
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}
