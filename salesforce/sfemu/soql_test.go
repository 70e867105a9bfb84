package sfemu

import (
	"strings"
	"testing"
)

func TestSOQLSubset(t *testing.T) {
	records := []Record{
		{"Id": "1", "Status__c": "Discarded", "SystemModstamp": "2024-05-01T10:00:00.000Z", "N": 3.0},
		{"Id": "2", "Status__c": "New", "SystemModstamp": "2024-05-01T11:00:00.000Z", "N": 1.0},
		{"Id": "3", "Status__c": "Discarded", "SystemModstamp": "2024-05-01T12:00:00.000Z"},
		{"Id": "4", "Status__c": "It's", "SystemModstamp": "2024-05-01T13:00:00.000Z", "N": 2.0},
	}
	for _, c := range []struct {
		q    string
		want string // ids in order
	}{
		{"SELECT Id FROM X", "1,2,3,4"},
		{"SELECT Id FROM X WHERE Status__c = 'Discarded'", "1,3"},
		{"select Id from X where Status__c != 'Discarded' order by Id desc", "4,2"},
		{"SELECT Id FROM X WHERE Status__c = 'Discarded' AND SystemModstamp >= 2024-05-01T11:00:00Z", "3"},
		{"SELECT Id FROM X WHERE SystemModstamp > 2024-05-01T10:00:00Z ORDER BY SystemModstamp DESC LIMIT 2", "4,3"},
		{"SELECT Id FROM X WHERE Status__c IN ('New', 'It\\'s')", "2,4"},
		{"SELECT Id FROM X WHERE N < 3 ORDER BY N ASC", "2,4"},
		{"SELECT Id FROM X WHERE N = null", "3"},
	} {
		q, err := parseSOQL(c.q)
		if err != nil {
			t.Errorf("%s: %v", c.q, err)
			continue
		}
		var ids []string
		for _, r := range q.run(records, "v68.0") {
			ids = append(ids, r["Id"].(string))
		}
		if got := strings.Join(ids, ","); got != c.want {
			t.Errorf("%s = %s, want %s", c.q, got, c.want)
		}
	}
	for _, bad := range []string{"", "SELECT Id", "SELECT Id FROM X WHERE", "SELECT Id FROM X WHERE A LIKE 'x'",
		"SELECT Id FROM X LIMIT many", "SELECT Id FROM X WHERE A = 'open", "SELECT Id FROM X GROUP BY A"} {
		if _, err := parseSOQL(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
