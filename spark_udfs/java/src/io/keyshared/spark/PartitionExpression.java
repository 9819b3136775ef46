package io.keyshared.spark;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.analysis.TypeCheckResult;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeBlock;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.expressions.codegen.JavaCode;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.unsafe.types.UTF8String;
import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@code ks_partition(key, num_partitions, 'partitioner')}: the partition another system's
 * partitioner gives a key ({@link Partitioner}), as a native Catalyst expression with code
 * generation. NULL where that system picks no fixed partition for the key. The partitioner and
 * the partition count are constants, checked when the call is built, at analysis.
 */
public final class PartitionExpression extends ProductExpression {
  private static final long serialVersionUID = 1L;
  /** The SQL name. */
  public static final String NAME = "ks_partition";

  private final Expression child;
  private final Partitioner partitioner;
  private final int numPartitions;

  public PartitionExpression(Expression child, Partitioner partitioner, int numPartitions) {
    this.child = Objects.requireNonNull(child);
    this.partitioner = Objects.requireNonNull(partitioner);
    if (numPartitions < 1) {
      throw new KeysharedException(
          NAME + ": num_partitions must be in [1, 2**31 - 1], got " + numPartitions);
    }
    this.numPartitions = numPartitions;
  }

  @Override
  public Expression child() {
    return child;
  }

  /** The call {@code ks_partition(key, num_partitions, partitioner)}: arguments checked. */
  public static PartitionExpression build(List<Expression> args) {
    if (args.size() != 3) {
      throw new KeysharedException(
          NAME + " takes 3 arguments (key, num_partitions, partitioner), got " + args.size());
    }
    return new PartitionExpression(args.get(0), partitionerArg(args.get(2)), countArg(args.get(1)));
  }

  private static Object constant(Expression arg, String what) {
    if (!arg.foldable()) {
      throw new KeysharedException(NAME + ": " + what + " must be a constant, not " + arg.sql());
    }
    return arg.eval(null);
  }

  private static Partitioner partitionerArg(Expression arg) {
    Object value = constant(arg, "partitioner");
    if (value == null || !(arg.dataType() instanceof StringType)) {
      throw new KeysharedException(
          NAME + ": partitioner must be a string naming one, got " + arg.sql());
    }
    return Partitioner.named(value.toString());
  }

  private static int countArg(Expression arg) {
    Object value = constant(arg, "num_partitions");
    DataType type = arg.dataType();
    if (value == null || !(type instanceof IntegerType || type instanceof LongType
        || type == DataTypes.ShortType || type == DataTypes.ByteType)) {
      throw new KeysharedException(
          NAME + ": num_partitions must be an integer, got " + arg.sql());
    }
    long n = ((Number) value).longValue();
    if (n < 1 || n > Integer.MAX_VALUE) {
      throw new KeysharedException(NAME + ": num_partitions must be in [1, 2**31 - 1], got " + n);
    }
    return (int) n;
  }

  @Override
  public DataType dataType() {
    return DataTypes.IntegerType;
  }

  @Override
  public boolean nullable() {
    return partitioner != Partitioner.SPARK_BUCKET;
  }

  @Override
  public String prettyName() {
    return NAME;
  }

  @Override
  public String sql() {
    return NAME + "(" + child.sql() + ", " + numPartitions + ", '" + partitioner.scheme() + "')";
  }

  @Override
  public scala.collection.Iterator<Object> flatArguments() {
    return CollectionConverters.asScala(
        List.<Object>of(child, numPartitions, partitioner.scheme()).iterator());
  }

  @Override
  public TypeCheckResult checkInputDataTypes() {
    DataType type = child.dataType();
    if (partitioner.takes(type)) {
      return TypeCheckResult.TypeCheckSuccess$.MODULE$;
    }
    String takes = partitioner.takes(DataTypes.LongType) ? "string, binary, tinyint, smallint, int or bigint" : "string or binary";
    return new TypeCheckResult.TypeCheckFailure(
        NAME + " under '" + partitioner.scheme() + "' takes a " + takes + " key, got "
            + type.simpleString());
  }

  private int partition(Object key) {
    if (key == null) {
      return partitioner.ofNull(numPartitions);
    }
    if (key instanceof UTF8String) {
      return partitioner.ofString((UTF8String) key, numPartitions);
    }
    if (key instanceof byte[]) {
      return partitioner.ofBytes((byte[]) key, numPartitions);
    }
    if (key instanceof Long) {
      return partitioner.ofLong((Long) key, numPartitions);
    }
    return partitioner.ofInt(((Number) key).intValue(), numPartitions);
  }

  @Override
  public Object eval(InternalRow input) {
    int p = partition(child.eval(input));
    return p == Partitioner.NONE ? null : p;
  }

  /** The name of the {@link Partitioner} method for keys of the child's type. */
  private String method() {
    DataType type = child.dataType();
    if (type instanceof StringType) {
      return "ofString";
    }
    if (type instanceof IntegerType || type == DataTypes.ShortType || type == DataTypes.ByteType) {
      return "ofInt"; // a byte or short widens to int in the generated call
    }
    return type instanceof LongType ? "ofLong" : "ofBytes";
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    ExprCode key = child.genCode(ctx);
    String p = ctx.freshName("partition");
    String of = Partitioner.class.getName() + "." + partitioner.name() + ".";
    String n = Integer.toString(numPartitions);
    Seq<String> parts =
        CollectionConverters.asScala(
                Arrays.asList(
                    "\n",
                    "\nint " + p + " = ",
                    " ? " + of + "ofNull(" + n + ") : " + of + method() + "(",
                    ", " + n + ");\nboolean ",
                    " = " + p + " == " + Partitioner.NONE + ";\nint ",
                    " = " + p + ";\n"))
            .toList();
    Seq<JavaCode> inputs =
        CollectionConverters.asScala(
                Arrays.<JavaCode>asList(key.code(), key.isNull(), key.value(), ev.isNull(), ev.value()))
            .toList();
    return ev.copy(new CodeBlock(parts, inputs), ev.isNull(), ev.value());
  }

  @Override
  public Expression withNewChildrenInternal(IndexedSeq<Expression> newChildren) {
    return new PartitionExpression(newChildren.apply(0), partitioner, numPartitions);
  }

  @Override
  protected Object[] fields() {
    return new Object[] {child, partitioner, numPartitions};
  }
}
