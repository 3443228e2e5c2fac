package agent

import "path/filepath"

// prepareCodex returns the -c overrides a Codex worker runs with.
func prepareCodex(w WorkerSpec, perm string) Setup {
	args := "-c " + Quote("notify="+tomlArray(w.NotifyBin, "hook", "codex"))
	_ = filepath.Join
	_ = perm
	return Setup{Args: args}
}
