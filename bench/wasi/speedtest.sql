-- The SQLite workload of the wasi bench suite (cargo xtask bench wasi), run by
-- sql DB speedtest.sql on Scion (WASI, compiled ahead of time and interpreted) and
-- natively on Linux: a reduced speedtest1-like mix. A table with an index, 2,000 rows
-- inserted in 20 transactions of 100 (each commit a journal and an fsync on a file
-- database), range queries on the index, LIKE scans of the text, an update and a
-- delete in a transaction each, and a checksum the suite compares across the runs.
-- (No quotes or semicolons in these comments: the sql program splits at them.)
create table t1(a integer primary key, b integer, c text);
create index i1 on t1(b);
begin; with recursive n(i) as (select 1 union all select i + 1 from n where i < 100) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 101 union all select i + 1 from n where i < 200) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 201 union all select i + 1 from n where i < 300) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 301 union all select i + 1 from n where i < 400) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 401 union all select i + 1 from n where i < 500) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 501 union all select i + 1 from n where i < 600) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 601 union all select i + 1 from n where i < 700) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 701 union all select i + 1 from n where i < 800) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 801 union all select i + 1 from n where i < 900) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 901 union all select i + 1 from n where i < 1000) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 1001 union all select i + 1 from n where i < 1100) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 1101 union all select i + 1 from n where i < 1200) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 1201 union all select i + 1 from n where i < 1300) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 1301 union all select i + 1 from n where i < 1400) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 1401 union all select i + 1 from n where i < 1500) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 1501 union all select i + 1 from n where i < 1600) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 1601 union all select i + 1 from n where i < 1700) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 1701 union all select i + 1 from n where i < 1800) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 1801 union all select i + 1 from n where i < 1900) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
begin; with recursive n(i) as (select 1901 union all select i + 1 from n where i < 2000) insert into t1 select i, (i * 7919) % 1000000, 'row ' || ((i * 7919) % 1000000) || ' of ' || i || ', some text to make the row longer' from n; commit;
select count(*), coalesce(sum(b), 0) from t1 where b between 0 and 20000;
select count(*), coalesce(sum(b), 0) from t1 where b between 50000 and 70000;
select count(*), coalesce(sum(b), 0) from t1 where b between 100000 and 120000;
select count(*), coalesce(sum(b), 0) from t1 where b between 150000 and 170000;
select count(*), coalesce(sum(b), 0) from t1 where b between 200000 and 220000;
select count(*), coalesce(sum(b), 0) from t1 where b between 250000 and 270000;
select count(*), coalesce(sum(b), 0) from t1 where b between 300000 and 320000;
select count(*), coalesce(sum(b), 0) from t1 where b between 350000 and 370000;
select count(*), coalesce(sum(b), 0) from t1 where b between 400000 and 420000;
select count(*), coalesce(sum(b), 0) from t1 where b between 450000 and 470000;
select count(*), coalesce(sum(b), 0) from t1 where b between 500000 and 520000;
select count(*), coalesce(sum(b), 0) from t1 where b between 550000 and 570000;
select count(*), coalesce(sum(b), 0) from t1 where b between 600000 and 620000;
select count(*), coalesce(sum(b), 0) from t1 where b between 650000 and 670000;
select count(*), coalesce(sum(b), 0) from t1 where b between 700000 and 720000;
select count(*), coalesce(sum(b), 0) from t1 where b between 750000 and 770000;
select count(*), coalesce(sum(b), 0) from t1 where b between 800000 and 820000;
select count(*), coalesce(sum(b), 0) from t1 where b between 850000 and 870000;
select count(*), coalesce(sum(b), 0) from t1 where b between 900000 and 920000;
select count(*), coalesce(sum(b), 0) from t1 where b between 950000 and 970000;
select count(*) from t1 where c like '%of 01%';
select count(*) from t1 where c like '%of 11%';
select count(*) from t1 where c like '%of 21%';
select count(*) from t1 where c like '%of 31%';
select count(*) from t1 where c like '%of 41%';
select count(*) from t1 where c like '%of 51%';
select count(*) from t1 where c like '%of 61%';
select count(*) from t1 where c like '%of 71%';
select count(*) from t1 where c like '%of 81%';
select count(*) from t1 where c like '%of 91%';
begin; update t1 set b = b + 1 where a % 7 = 0; commit;
begin; delete from t1 where a % 3 = 0; commit;
select 'wasibench: sql checksum=' || (sum(b) + count(*)) from t1;
