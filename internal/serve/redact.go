package serve

import "github.com/factory-harness/factory/internal/redact"

// Redacted replaces a secret in everything serve shows.
const Redacted = redact.Redacted
