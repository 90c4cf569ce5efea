//go:build !unix

package fdpass

// Rights returns nothing where descriptors cannot be handed over.
func Rights([]byte) []int { return nil }

// Close does nothing: there are no descriptors to close.
func Close([]int) {}
