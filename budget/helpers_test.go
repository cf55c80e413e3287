package budget

import "errors"

// errorsIs is errors.Is, named for readability in tables.
func errorsIs(err, target error) bool { return errors.Is(err, target) }
