// Apache Curator's own locks, contending with distlock on the same ZooKeeper path.
//
// Usage: java CuratorContender CONNECT PATH MODE ITERATIONS COUNTER_FILE INSIDE_FILE
// MODE is mutex (InterProcessMutex), write or read (InterProcessReadWriteLock), or
// semaphore<N> (InterProcessSemaphoreV2 with N leases). Each iteration takes the lock. A
// mutex or writer creates INSIDE_FILE (which must not exist: no one else is inside), reads
// COUNTER_FILE, pauses, writes it back plus one and removes INSIDE_FILE; a reader checks
// that INSIDE_FILE does not exist (no writer is inside); a semaphore holder puts a file of
// its own in the directory INSIDE_FILE and checks it holds no more than N, then increments
// the counter under a file lock of its own kind. Exits 3 on an overlap.
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryNTimes;

public class CuratorContender {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String path = args[1];
        String mode = args[2];
        int iterations = Integer.parseInt(args[3]);
        Path counter = Paths.get(args[4]);
        Path inside = Paths.get(args[5]);
        CuratorFramework client =
            CuratorFrameworkFactory.newClient(connect, 10000, 5000, new RetryNTimes(20, 100));
        client.start();
        client.blockUntilConnected();
        if (mode.startsWith("semaphore")) {
            int limit = Integer.parseInt(mode.substring("semaphore".length()));
            InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(client, path, limit);
            for (int i = 0; i < iterations; i++) {
                Lease lease = semaphore.acquire(60, TimeUnit.SECONDS);
                if (lease == null) {
                    System.err.println("no lease within 60 s");
                    System.exit(2);
                }
                try {
                    Path mine = inside.resolve("curator-" + ProcessHandle.current().pid() + "-" + i);
                    Files.createFile(mine);
                    long holders;
                    try (java.util.stream.Stream<Path> entries = Files.list(inside)) {
                        holders = entries.count();
                    }
                    if (holders > limit) {
                        System.err.println(holders + " holders of a semaphore of " + limit);
                        System.exit(3);
                    }
                    Thread.sleep(1);
                    Files.delete(mine);
                } finally {
                    semaphore.returnLease(lease);
                }
            }
            client.close();
            System.out.println("done");
            return;
        }
        InterProcessLock lock;
        if (mode.equals("mutex")) {
            lock = new InterProcessMutex(client, path);
        } else if (mode.equals("write")) {
            lock = new InterProcessReadWriteLock(client, path).writeLock();
        } else {
            lock = new InterProcessReadWriteLock(client, path).readLock();
        }
        for (int i = 0; i < iterations; i++) {
            if (!lock.acquire(60, TimeUnit.SECONDS)) {
                System.err.println("no lock within 60 s");
                System.exit(2);
            }
            try {
                if (mode.equals("read")) {
                    if (Files.exists(inside)) {
                        System.err.println("a writer is inside while a reader holds the lock");
                        System.exit(3);
                    }
                    Thread.sleep(1);
                    if (Files.exists(inside)) {
                        System.err.println("a writer entered while a reader held the lock");
                        System.exit(3);
                    }
                } else {
                    try {
                        Files.createFile(inside);
                    } catch (FileAlreadyExistsException e) {
                        System.err.println("someone else is inside");
                        System.exit(3);
                    }
                    String text = new String(Files.readAllBytes(counter)).trim();
                    int value = text.isEmpty() ? 0 : Integer.parseInt(text);
                    Thread.sleep(1);
                    Files.write(counter, String.valueOf(value + 1).getBytes());
                    Files.delete(inside);
                }
            } finally {
                lock.release();
            }
        }
        client.close();
        System.out.println("done");
    }
}
