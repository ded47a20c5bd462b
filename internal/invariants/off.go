//go:build !invariants

package invariants

// Enabled reports whether this build checks invariants: false, the build
// lacks the invariants tag (a production build).
const Enabled = false
