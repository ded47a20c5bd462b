// Package gostmt shows that go statements are rejected, and that function
// values and literals without go are not.
package gostmt

func work() {}

func bad() {
	go work()   // want `go-statement: go statement: a node is one event loop`
	go func() { // want `go-statement`
	}()
}

func ok(post func(func())) {
	post(work) // hand work to the loop instead
	f := func() { work() }
	f()
	defer work()
}
