// Package selectstmt shows which select statements the guard rejects.
package selectstmt

func bad(a, b chan int, c chan<- int) {
	select { // want `select: select with 2 communication clauses: the runtime picks a ready one at random`
	case <-a:
	case <-b:
	}
	select { // want `select with 3 communication clauses`
	case v := <-a:
		_ = v
	case c <- 1:
	case <-b:
	default:
	}
}

func ok(a chan int) {
	select { // one communication and a default: a deterministic poll
	case v := <-a:
		_ = v
	default:
	}
	select { // a single blocking receive
	case <-a:
	}
	_ = <-a
}

func forever() {
	select {} // blocks forever, deterministically
}
