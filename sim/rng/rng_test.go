package rng

import "testing"

func TestSameSeedSameStream(t *testing.T) {
	a, b := New(42), New(42)
	for i := 0; i < 1000; i++ {
		if x, y := a.Uint64(), b.Uint64(); x != y {
			t.Fatalf("draw %d: %x != %x", i, x, y)
		}
	}
}

func TestForkIgnoresDrawOrder(t *testing.T) {
	a, b := New(7), New(7)
	for i := 0; i < 17; i++ {
		b.Uint64() // drawing from the parent must not change its children
	}
	b.Fork("other").Uint64()
	x, y := a.Fork("node/1"), b.Fork("node/1")
	for i := 0; i < 100; i++ {
		if x.Uint64() != y.Uint64() {
			t.Fatalf("fork diverged at draw %d", i)
		}
	}
}

func TestDistinctLabelsAndSeedsDiffer(t *testing.T) {
	r := New(1)
	if r.Fork("a").Uint64() == r.Fork("b").Uint64() {
		t.Fatal("labels a and b gave the same first draw")
	}
	if New(1).Uint64() == New(2).Uint64() {
		t.Fatal("seeds 1 and 2 gave the same first draw")
	}
	if r.Fork("a").Fork("b").Uint64() == r.Fork("b").Fork("a").Uint64() {
		t.Fatal("fork paths a/b and b/a gave the same first draw")
	}
}

func TestUint64nIsInRangeAndCoversIt(t *testing.T) {
	r := New(3)
	var seen [7]int
	for i := 0; i < 7000; i++ {
		v := r.Uint64n(7)
		if v >= 7 {
			t.Fatalf("Uint64n(7) = %d", v)
		}
		seen[v]++
	}
	for v, n := range seen {
		if n < 800 || n > 1200 {
			t.Fatalf("value %d drawn %d times of 7000; expected about 1000", v, n)
		}
	}
}

func TestReadFillsEveryByte(t *testing.T) {
	r := New(9)
	p := make([]byte, 13)
	if n, err := r.Read(p); n != 13 || err != nil {
		t.Fatalf("Read = %d, %v", n, err)
	}
	zero := 0
	for _, b := range p {
		if b == 0 {
			zero++
		}
	}
	if zero > 3 {
		t.Fatalf("Read left %d of 13 bytes zero: %x", zero, p)
	}
}
