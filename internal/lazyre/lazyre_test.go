package lazyre

import "testing"

func TestNew(t *testing.T) {
	re := New(`^a+b$`)
	if first, again := re(), re(); first != again {
		t.Errorf("New compiled twice: %p, %p", first, again)
	}
	if !re().MatchString("aab") || re().MatchString("ba") {
		t.Errorf("%s matches wrongly", re())
	}
	bad := New(`(`)
	defer func() {
		if recover() == nil {
			t.Error("an expression that does not compile did not panic on use")
		}
	}()
	bad()
}
