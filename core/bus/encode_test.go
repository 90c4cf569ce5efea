package bus

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestReadResultJSON: the hand-written encoder says what encoding/json
// would say about the same result.
func TestReadResultJSON(t *testing.T) {
	five, nine := uint64(5), uint64(9)
	for _, r := range []ReadResult{
		{Channel: "journal", Events: []Event{}, Epoch: "e1"},
		{Channel: "user.a-b_c", Events: []Event{{Channel: "user.a-b_c", Seq: 5, TS: 17, Payload: json.RawMessage(`{"a": [1, "x\n"]}`)},
			{Channel: "user.a-b_c", Seq: 9, TS: -1}}, OldestSeq: &five, LatestSeq: &nine, NextSeq: 10, Epoch: `q"<&>`, Truncated: true},
	} {
		got, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		type plain ReadResult // no MarshalJSON
		want, _ := json.Marshal(plain(r))
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("invalid JSON %s: %v", got, err)
		}
		json.Unmarshal(want, &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("got %s\nwant %s", got, want)
		}
	}
}
