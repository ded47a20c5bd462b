//go:build invariants

package invariants

// Enabled reports whether this build checks invariants: true, the build has
// the invariants tag.
const Enabled = true
