// Package trust holds the two trust gates of the replay rule as the user
// grants them: the workspace trust [Store] (the user's list of trusted
// directories, outside every workspace), the workspace gate ([Workspace]:
// the store or --trust-workspace), and one [Resolver] per run that answers
// both gates — server trust from the current configuration, workspace trust
// from the store — for the engine's every decision — and the gate of
// commands that only look ([MayLook]): which servers they may start.
//
// # Caveats
//
//   - No file in a workspace can grant workspace trust: the store lives in
//     the user's config directory (~/.config/mcpflow by default) and changes
//     only through Add and Remove (mcpflow trust add/remove).
//   - The store's cross-process lock is flock: Linux and the BSDs. Elsewhere
//     writers in one process are serialized, not across processes.
//   - A Resolver notices a changed file by its size, modification time and
//     identity; a workspace whose symlink is re-pointed during a run keeps
//     the answer for its old target until the store changes.
package trust
