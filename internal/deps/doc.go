// Package deps holds no code: its test checks the package graph of the
// module — which package may import which — so that the layers the design
// describes (journal and replay at the bottom, servers, trust and workflow
// beside each other, engine above them, service above the engine, the CLI
// on top) stay that way.
package deps
