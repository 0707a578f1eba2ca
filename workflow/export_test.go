package workflow

import "context"

// Exported for tests in package engine_test.
var (
	WorkflowKeys = workflowKeys
	InputKeys    = inputKeys
	StepKeys     = stepKeys
	RetryKeys    = retryKeys
)

// EvalCondition evaluates a step's if expression.
func EvalCondition(ctx context.Context, st *Step, inputs, steps map[string]any) error {
	_, err := st.If.Eval(ctx, Vars{Inputs: inputs, Steps: steps})
	return err
}
