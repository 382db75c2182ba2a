// Package config reads, completes and checks a ferry cluster
// description: the hosts, the components with their members, strategy,
// health checks and hooks, the release catalog and the failure policy.
// Nothing else in ferry reads the description file.
//
// # Contract
//
// Parse turns the bytes of a description into a *Cluster in three
// steps: decode (YAML through gopkg.in/yaml.v3's node API), apply the
// defaults (see defaults.go, the one place they are written down), and
// Validate. Load does the same for a file path. Either returns a
// Cluster that passed Validate, or nil and an *Errors listing every
// problem found (Load also returns the error of opening or reading the
// file as it is), each with the file, the line, the field path and the
// reason:
//
//	cluster.yaml:14: components[1].strategy.max_batch: must be at least 1
//
// Unknown keys are problems too (a misspelt key would otherwise be a
// silently ignored setting), and so are values of the wrong type,
// duplicate keys, templates that do not render for the members they
// are written for, and references to hosts, components or releases
// that do not exist.
//
// The package does no I/O beyond Load reading its one file (up to
// MaxFileSize): it dials nothing, resolves no names and runs nothing.
// It never panics on input: empty, binary, deeply nested or
// alias-expanded ("billion laughs") documents are refused with an
// error, and a document is refused when its aliases expand to more
// than MaxNodes nodes (what is written out is bounded by MaxFileSize
// alone: a 20,000-member description parses in under a second). At
// most MaxProblems problems are listed, with a count of the others.
//
// A key left out takes its default; a value written is judged as
// written, zero included, against its range (the table of defaults.go):
// "max_unavailable: 0" is refused, not turned into 1. Two endpoints
// that are one place (two members on one address, localhost and
// 127.0.0.1, a member on an agent's port, two hosts with one agent)
// are refused, compared without any DNS lookup. An unknown key close
// to a known one is named with it (adress: did you mean address?),
// and what only follows from it (the address "must be set") is left
// out.
//
// Strings in runs, checks and hooks are Go text/templates over
// TemplateData (.Name, .Component, .Host, .Address, .Version, .Any,
// .Vars, .Members, .PID). Render executes them with missingkey=error; a
// rendered string is an argv element, a URL or a header, never given
// to a shell.
//
// A Cluster built in Go rather than parsed gets its defaults from
// ApplyDefaults and its checks from Validate; its problems then have
// no file or line.
//
// A Cluster is read-only once parsed; its methods are safe for
// concurrent use by readers, and so is Render.
package config
