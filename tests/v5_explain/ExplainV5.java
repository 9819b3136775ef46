/*
 * Producing and consuming on a Pulsar 5 scalable topic with the V5 client, for
 * tests/test_broker_explain_scalable.py (run as a single-file program on the 5.0.0-M1
 * classpath). One JSON object a line on stdout.
 *
 *   produce SERVICE_URL TOPIC KEY...
 *       sends one message per KEY (value = key, batching off); prints {"sent": n}
 *   consume SERVICE_URL TOPIC SUBSCRIPTION CONSUMER COUNT SECONDS ack|keep
 *       a stream consumer that receives up to COUNT messages within SECONDS, printing
 *       {"key": k, "topic": "segment://..."} for each (the segment it was stored in),
 *       acknowledging each (ack) or none (keep), then closes
 */
import java.time.Duration;
import java.time.Instant;
import org.apache.pulsar.client.api.v5.Message;
import org.apache.pulsar.client.api.v5.Producer;
import org.apache.pulsar.client.api.v5.PulsarClient;
import org.apache.pulsar.client.api.v5.StreamConsumer;
import org.apache.pulsar.client.api.v5.config.BatchingPolicy;
import org.apache.pulsar.client.api.v5.config.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.v5.schema.Schema;

public class ExplainV5 {
    public static void main(String[] args) throws Exception {
        try (PulsarClient client = PulsarClient.builder().serviceUrl(args[1]).build()) {
            if (args[0].equals("produce")) {
                produce(client, args);
            } else {
                consume(client, args);
            }
        }
    }

    private static void produce(PulsarClient client, String[] args) throws Exception {
        try (Producer<String> producer = client.newProducer(Schema.string()).topic(args[2])
                .batchingPolicy(BatchingPolicy.ofDisabled()).create()) {
            for (int i = 3; i < args.length; i++) {
                producer.newMessage().key(args[i]).value(args[i]).send();
            }
        }
        System.out.println("{\"sent\": " + (args.length - 3) + "}");
    }

    private static void consume(PulsarClient client, String[] args) throws Exception {
        int want = Integer.parseInt(args[5]);
        Instant deadline = Instant.now().plusSeconds(Long.parseLong(args[6]));
        boolean ack = args[7].equals("ack");
        StreamConsumer<String> consumer = client.newStreamConsumer(Schema.string()).topic(args[2])
                .subscriptionName(args[3]).consumerName(args[4])
                .subscriptionInitialPosition(SubscriptionInitialPosition.EARLIEST).subscribe();
        try {
            int got = 0;
            while (got < want && Instant.now().isBefore(deadline)) {
                Message<String> m = consumer.receive(Duration.ofMillis(200));
                if (m == null) {
                    continue;
                }
                got++;
                if (ack) {
                    consumer.acknowledgeCumulative(m.id());
                }
                System.out.println("{\"key\": \"" + m.key().orElse("") + "\", \"topic\": \""
                        + m.topic() + "\"}");
            }
        } finally {
            consumer.close();
        }
    }
}
