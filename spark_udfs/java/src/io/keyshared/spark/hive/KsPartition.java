package io.keyshared.spark.hive;

import java.util.Arrays;

import io.keyshared.spark.KeysharedException;
import io.keyshared.spark.PartitionExpression;
import io.keyshared.spark.Partitioner;
import org.apache.hadoop.hive.ql.exec.UDFArgumentException;
import org.apache.hadoop.hive.ql.metadata.HiveException;
import org.apache.hadoop.hive.ql.udf.generic.GenericUDF;
import org.apache.hadoop.hive.serde2.objectinspector.ConstantObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.ObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.primitive.BinaryObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.primitive.IntObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.primitive.LongObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.primitive.PrimitiveObjectInspectorFactory;
import org.apache.hadoop.hive.serde2.objectinspector.primitive.StringObjectInspector;
import org.apache.hadoop.io.BytesWritable;
import org.apache.hadoop.io.IntWritable;
import org.apache.hadoop.io.LongWritable;
import org.apache.hadoop.io.Text;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * {@code ks_partition(key, num_partitions, partitioner)} as a Hive GenericUDF, for {@code
 * CREATE FUNCTION ks_partition AS 'io.keyshared.spark.hive.KsPartition' USING JAR '...'}: the
 * same arguments and results as {@link PartitionExpression}. As with {@link KeyUDF}, a string
 * key reaches a Hive class decoded with U+FFFD in place of bytes that are not UTF-8, unless
 * the session extension runs the call as the native function.
 */
public final class KsPartition extends GenericUDF {
  private transient ObjectInspector keyInspector;
  private transient Partitioner partitioner;
  private transient int numPartitions;

  @Override
  public ObjectInspector initialize(ObjectInspector[] args) throws UDFArgumentException {
    String name = PartitionExpression.NAME;
    if (args.length != 3) {
      throw new UDFArgumentException(
          name + " takes 3 arguments (key, num_partitions, partitioner), got " + args.length);
    }
    Object count = constant(args[1], "num_partitions");
    if (!(count instanceof IntWritable || count instanceof LongWritable)) {
      throw new UDFArgumentException(name + ": num_partitions must be an integer constant");
    }
    long n = count instanceof IntWritable ? ((IntWritable) count).get() : ((LongWritable) count).get();
    if (n < 1 || n > Integer.MAX_VALUE) {
      throw new UDFArgumentException(name + ": num_partitions must be in [1, 2**31 - 1], got " + n);
    }
    Object scheme = constant(args[2], "partitioner");
    if (!(scheme instanceof Text)) {
      throw new UDFArgumentException(name + ": partitioner must be a string constant");
    }
    try {
      partitioner = Partitioner.named(scheme.toString());
    } catch (KeysharedException e) {
      throw new UDFArgumentException(e.getMessage());
    }
    if (!partitioner.takes(sparkType(args[0]))) {
      throw new UDFArgumentException(
          name + " under '" + partitioner.scheme() + "' cannot take a " + args[0].getTypeName()
              + " key");
    }
    keyInspector = args[0];
    numPartitions = (int) n;
    return PrimitiveObjectInspectorFactory.javaIntObjectInspector;
  }

  /** The Spark type of a key of that inspector (NullType for none the function takes). */
  private static DataType sparkType(ObjectInspector inspector) {
    if (inspector instanceof StringObjectInspector) {
      return DataTypes.StringType;
    }
    if (inspector instanceof BinaryObjectInspector) {
      return DataTypes.BinaryType;
    }
    if (inspector instanceof IntObjectInspector) {
      return DataTypes.IntegerType;
    }
    return inspector instanceof LongObjectInspector ? DataTypes.LongType : DataTypes.NullType;
  }

  private static Object constant(ObjectInspector inspector, String what) throws UDFArgumentException {
    if (!(inspector instanceof ConstantObjectInspector)) {
      throw new UDFArgumentException(PartitionExpression.NAME + ": " + what + " must be a constant");
    }
    return ((ConstantObjectInspector) inspector).getWritableConstantValue();
  }

  @Override
  public Object evaluate(DeferredObject[] args) throws HiveException {
    Object key = args[0].get();
    int p;
    if (key == null) {
      p = partitioner.ofNull(numPartitions);
    } else if (keyInspector instanceof StringObjectInspector) {
      Text text = ((StringObjectInspector) keyInspector).getPrimitiveWritableObject(key);
      p = partitioner.ofString(
          UTF8String.fromBytes(Arrays.copyOf(text.getBytes(), text.getLength())), numPartitions);
    } else if (keyInspector instanceof BinaryObjectInspector) {
      BytesWritable bytes = ((BinaryObjectInspector) keyInspector).getPrimitiveWritableObject(key);
      p = partitioner.ofBytes(bytes.copyBytes(), numPartitions);
    } else if (keyInspector instanceof IntObjectInspector) {
      p = partitioner.ofInt(((IntObjectInspector) keyInspector).get(key), numPartitions);
    } else {
      p = partitioner.ofLong(((LongObjectInspector) keyInspector).get(key), numPartitions);
    }
    return p == Partitioner.NONE ? null : p;
  }

  @Override
  public String getDisplayString(String[] children) {
    return PartitionExpression.NAME + "(" + String.join(", ", children) + ")";
  }
}
