package io.keyshared.spark.hive;

import java.util.Arrays;

import io.keyshared.spark.Functions;
import io.keyshared.spark.KeyFunction;
import io.keyshared.spark.KeysharedException;
import io.keyshared.spark.Murmur3;
import io.keyshared.spark.Router;
import org.apache.hadoop.hive.ql.exec.UDFArgumentException;
import org.apache.hadoop.hive.ql.metadata.HiveException;
import org.apache.hadoop.hive.ql.udf.generic.GenericUDF;
import org.apache.hadoop.hive.serde2.objectinspector.ConstantObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.ObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.ObjectInspectorFactory;
import org.apache.hadoop.hive.serde2.objectinspector.primitive.BinaryObjectInspector;
import org.apache.hadoop.hive.serde2.objectinspector.primitive.PrimitiveObjectInspectorFactory;
import org.apache.hadoop.hive.serde2.objectinspector.primitive.StringObjectInspector;
import org.apache.hadoop.io.BytesWritable;
import org.apache.hadoop.io.IntWritable;
import org.apache.hadoop.io.LongWritable;
import org.apache.hadoop.io.Text;

/**
 * A keyshared function as a Hive GenericUDF, for {@code CREATE FUNCTION ks_route AS
 * 'io.keyshared.spark.hive.KsRoute' USING JAR '...'} in a Hive-enabled session (the spark-sql
 * shell, the Thrift server). Same arguments and results as the native functions; slower, as
 * Spark converts every row to Hive's objects and back, so prefer the session extension
 * ({@code io.keyshared.spark.KeysharedExtensions}) where the session's conf can be set.
 *
 * <p>With the extension, calls of these classes run as the native functions. Without it, Spark
 * hands a string key here as a Java string, decoded with U+FFFD in place of bytes that are not
 * UTF-8: such a key (a {@code CAST(binary AS STRING)}) hashes its bytes only as a binary key.
 */
public abstract class KeyUDF extends GenericUDF {
  private final KeyFunction function;
  private transient ObjectInspector keyInspector;
  private transient Router router;
  private transient byte[] nullKey;

  protected KeyUDF(KeyFunction function) {
    this.function = function;
  }

  @Override
  public ObjectInspector initialize(ObjectInspector[] args) throws UDFArgumentException {
    int most = function.routes() ? 3 : 2;
    if (args.length < 1 || args.length > most) {
      throw new UDFArgumentException(
          function.sqlName() + " takes 1 to " + most + " arguments, got " + args.length);
    }
    if (!(args[0] instanceof StringObjectInspector || args[0] instanceof BinaryObjectInspector)) {
      throw new UDFArgumentException(
          KeysharedException.keyType(function.sqlName(), args[0].getTypeName()));
    }
    keyInspector = args[0];
    int nullKeyAt = 1;
    if (function.routes()) {
      Object json = args.length > 1 ? constant(args[1], "layout") : null;
      try {
        router = json != null ? Router.parse(json.toString(), Functions.confVersion()) : Functions.confLayout();
      } catch (KeysharedException e) {
        throw new UDFArgumentException(e.getMessage());
      }
      nullKeyAt = 2;
    }
    nullKey = args.length > nullKeyAt ? bytes(constant(args[nullKeyAt], "null_key")) : null;
    if (function.routes()) {
      // Writable fields: Hive folds a call on a constant key into a constant struct whose
      // fields it reads as writables, whatever inspector the call returned.
      return ObjectInspectorFactory.getStandardStructObjectInspector(
          Arrays.asList(Router.SEGMENT_ID, Router.BUCKET),
          Arrays.asList(
              PrimitiveObjectInspectorFactory.writableLongObjectInspector,
              PrimitiveObjectInspectorFactory.writableIntObjectInspector));
    }
    return function == KeyFunction.KEY_HASH
        ? PrimitiveObjectInspectorFactory.javaLongObjectInspector
        : PrimitiveObjectInspectorFactory.javaIntObjectInspector;
  }

  private Object constant(ObjectInspector inspector, String what) throws UDFArgumentException {
    if (!(inspector instanceof ConstantObjectInspector)) {
      throw new UDFArgumentException(function.sqlName() + ": " + what + " must be a constant");
    }
    Object value = ((ConstantObjectInspector) inspector).getWritableConstantValue();
    if (value != null && !(value instanceof Text || value instanceof BytesWritable)) {
      throw new UDFArgumentException(
          function.sqlName() + ": " + what + " must be a string, got " + inspector.getTypeName());
    }
    return value;
  }

  private static byte[] bytes(Object value) {
    if (value instanceof Text) {
      Text text = (Text) value;
      return Arrays.copyOf(text.getBytes(), text.getLength());
    }
    return value == null ? null : ((BytesWritable) value).copyBytes();
  }

  @Override
  public Object evaluate(DeferredObject[] args) throws HiveException {
    Object key = args[0].get();
    int hash;
    if (key == null) {
      if (nullKey == null) {
        throw new HiveException(KeysharedException.nullKey(function.sqlName()).getMessage());
      }
      hash = Murmur3.hashBinary(nullKey);
    } else if (keyInspector instanceof StringObjectInspector) {
      Text text = ((StringObjectInspector) keyInspector).getPrimitiveWritableObject(key);
      hash = Murmur3.hashBinary(text.getBytes(), 0, text.getLength());
    } else {
      BytesWritable bytes = ((BinaryObjectInspector) keyInspector).getPrimitiveWritableObject(key);
      hash = Murmur3.hashBinary(bytes.getBytes(), 0, bytes.getLength());
    }
    if (function.routes()) {
      return new Object[] {
        new LongWritable(router.segmentId(hash)), new IntWritable(router.bucket(hash))
      };
    }
    return function.value(hash, null);
  }

  @Override
  public String getDisplayString(String[] children) {
    return function.sqlName() + "(" + String.join(", ", children) + ")";
  }
}
