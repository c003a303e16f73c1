import { QueryFailedError } from 'typeorm';
import { AppError } from './app-error';
import { toErrorResponse } from './all-exceptions.filter';

/** A PostgreSQL error as the pg driver raises it: a message and its SQLSTATE. */
function databaseError(code: string, message: string): Error & { code: string } {
  return Object.assign(new Error(message), { code });
}

describe('toErrorResponse', () => {
  it('answers a statement timeout (57014) with 503 database_timeout and Retry-After', () => {
    const timeout = databaseError('57014', 'canceling statement due to statement timeout');
    for (const thrown of [timeout, new QueryFailedError('SELECT 1', [], timeout)]) {
      const answer = toErrorResponse(thrown, 'req_1');
      expect(answer.status).toBe(503);
      expect(answer.headers).toEqual({ 'Retry-After': '1' });
      expect(answer.body.error).toEqual({
        status: 503,
        code: 'database_timeout',
        message: 'The database took too long to answer; try again',
        request_id: 'req_1',
      });
    }
  });

  it('answers a database out of reach with 503 service_unavailable and Retry-After, whatever says so', () => {
    const lost = [
      new Error('timeout exceeded when trying to connect'),
      new Error('Connection terminated unexpectedly'),
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
      databaseError('57P01', 'terminating connection due to administrator command'),
      databaseError('08006', 'connection failure'),
      // A session refused: the database dropped, the password rotated, no room (review).
      databaseError('3D000', 'database "api" does not exist'),
      databaseError('28P01', 'password authentication failed for user "api"'),
      databaseError('28000', 'no pg_hba.conf entry for host'),
      databaseError('53300', 'sorry, too many clients already'),
      Object.assign(databaseError('08P01', 'pgbouncer cannot connect to server'), {
        severity: 'FATAL',
      }),
      new QueryFailedError(
        'SELECT 1',
        [],
        databaseError('57P03', 'the database system is starting up'),
      ),
    ];
    for (const thrown of lost) {
      const answer = toErrorResponse(thrown, 'req_4');
      expect(answer.status).toBe(503);
      expect(answer.headers).toEqual({ 'Retry-After': '1' });
      expect(answer.body.error).toEqual({
        status: 503,
        code: 'service_unavailable',
        message: 'The database is unavailable; try again',
        request_id: 'req_4',
      });
    }
    // Neither a statement's own failure nor any other error.
    expect(toErrorResponse(databaseError('23505', 'duplicate key'), 'r').status).toBe(500);
    const misuse = Object.assign(databaseError('08P01', 'bind message supplies 1 parameters'), {
      severity: 'ERROR',
    });
    expect(toErrorResponse(misuse, 'r').status).toBe(500);
    expect(toErrorResponse(new Error('Connection to the moon lost'), 'r').status).toBe(500);
  });

  it('keeps any other database error a 500 that says nothing of it', () => {
    const answer = toErrorResponse(
      databaseError('23505', 'duplicate key value violates unique constraint "users_email_key"'),
      'req_2',
    );
    expect(answer.status).toBe(500);
    expect(JSON.stringify(answer.body)).not.toContain('users_email_key');
  });

  it('answers an AppError with its own code', () => {
    expect(toErrorResponse(new AppError('not_found', 'No such thing'), 'req_3').status).toBe(404);
  });
});
