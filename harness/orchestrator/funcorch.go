package orchestrator

import "context"

// Func is Go code as the orchestrator: a user's own bootstrap function, run
// in-process (sim/simtest.Certify). Its nil or error is the bootstrap's exit
// 0 or non-zero. It must return when ctx ends (the scenario's time is up).
type Func struct {
	F func(ctx context.Context, env *Env) error
}

// Name implements Orchestrator.
func (*Func) Name() string { return "func" }

// Run implements Orchestrator.
func (f *Func) Run(ctx context.Context, env *Env) error {
	env.step("bootstrap function")

	err := f.F(ctx, env)
	if err != nil {
		env.step("bootstrap function returned an error: " + err.Error())

		return err
	}

	env.step("bootstrap function returned nil")

	return nil
}
