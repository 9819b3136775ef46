// Sarama's HashPartitioner and kafka-go's Hash balancer, as the Go clients run them: one key
// a line (hex) on stdin, "sarama kafka-go" partitions a line on stdout, for the partition
// count given as the only argument.
package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
)

func main() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || n < 1 {
		fmt.Fprintln(os.Stderr, "usage: go_partitioners PARTITIONS < hex keys")
		os.Exit(2)
	}
	partitions := make([]int, n)
	for i := range partitions {
		partitions[i] = i
	}
	saramas := sarama.NewHashPartitioner("t")
	var kafkaGo kafka.Hash
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<16), 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		key, err := hex.DecodeString(in.Text())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		p, err := saramas.Partition(&sarama.ProducerMessage{Key: sarama.ByteEncoder(key)}, int32(n))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Fprintf(out, "%d %d\n", p, kafkaGo.Balance(kafka.Message{Key: key}, partitions...))
	}
}
