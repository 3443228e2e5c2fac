package fleet

// The setup command (orch.yaml's setup) readies a worker's worktree before
// the plan's line is typed: npm ci, a build, a database. It can take
// minutes, so it runs off the loop, and its end is reported on Setups.

// RunSetup runs the setup command for attempt of plan in worker's
// worktree, in a goroutine, and reports its end on Setups.
func (f *Fleet) RunSetup(plan string, attempt int, worker string) {
	dir := f.WorkDir(worker)
	f.log.Info("setup running", "plan", plan, "worker", worker, "attempt", attempt)
	go func() {
		var err error
		if f.cfg.Setup != nil {
			err = f.cfg.Setup(dir, plan, worker)
		}
		send(f, f.setups, SetupDone{Plan: plan, Worker: worker, Attempt: attempt, Err: err})
	}()
}
