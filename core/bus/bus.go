package bus

// Bus is the kernel's event bus. (Implementation in progress.)
type Bus struct{}
