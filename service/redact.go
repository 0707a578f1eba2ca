package service

import (
	"bytes"
	"encoding/json"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/workflow"
)

// The journal keeps payloads faithfully (encrypted at rest); what the
// service hands to a front end is for showing, so the values of a run's
// secret inputs are redacted from it: from the run's inputs and outputs and
// from its invocations' arguments and results. Export with decrypt is the
// one way to read the faithful payloads.

// secretsOf is the values of a run's secret inputs.
func secretsOf(run *journal.Run) []string {
	if run == nil {
		return nil
	}
	return workflow.SecretValues(run.Secrets, run.Inputs)
}

// shownRun is a copy of run with its secrets redacted.
func shownRun(run *journal.Run) *journal.Run {
	secrets := secretsOf(run)
	if len(secrets) == 0 {
		return run
	}
	c := *run
	c.Inputs = redactMap(run.Inputs, secrets)
	for _, name := range run.Secrets {
		if _, ok := c.Inputs[name]; ok {
			c.Inputs[name] = workflow.Redacted
		}
	}
	c.Outputs = redactMap(run.Outputs, secrets)
	return &c
}

// shownInv is a copy of inv with the secrets of its run redacted.
func shownInv(inv journal.Invocation, secrets []string) journal.Invocation {
	if len(secrets) == 0 {
		return inv
	}
	inv.Arguments = workflow.RedactJSON(inv.Arguments, secrets)
	if inv.Result != nil {
		r := *inv.Result
		r.Content = workflow.RedactJSON(r.Content, secrets)
		r.StructuredContent = workflow.RedactJSON(r.StructuredContent, secrets)
		inv.Result = &r
	}
	return inv
}

func redactMap(m map[string]any, secrets []string) map[string]any {
	if m == nil {
		return nil
	}
	// A deep copy: the caller's map is the record's.
	b, _ := json.Marshal(m)
	var c map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if dec.Decode(&c) != nil {
		return m
	}
	for k, v := range c {
		c[k] = workflow.RedactValue(numbers(v), secrets)
	}
	return c
}

// numbers turns json.Number back into float64, as the records hold them.
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}

// shown redacts a report for showing.
func (r *Report) shown() *Report {
	secrets := secretsOf(r.Run)
	c := *r
	c.Run = shownRun(r.Run)
	c.Invocations = make([]journal.Invocation, len(r.Invocations))
	for i, inv := range r.Invocations {
		c.Invocations[i] = shownInv(inv, secrets)
	}
	return &c
}
