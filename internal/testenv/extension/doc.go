// Package extension adds one of each kind of extension ferry has, each
// in one file of its own that registers itself and that nothing else
// in the tree names: a strategy (strategy.go: reverse, the
// highest-named member first), a step a strategy adds before a batch
// (step.go: promoting, the role handed to an upgraded member), a
// substrate (substrate.go: inmemory, members in the process's own
// memory) and a kind of flow stage (stage.go: checkpoint, one call for
// the whole cluster between two stages). Its test runs an upgrade with
// all four through the real engine, and holds each name to its file:
// the proof that docs/ARCHITECTURE.md's "Adding a …" sections are true.
// Tests alone import it.
package extension
